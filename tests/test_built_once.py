"""Facts a report needs in several places are worked out once per report (issue 37): the cache
lookups (the cache view's rows and the counts a baseline compares come from the same pass)."""

from __future__ import annotations

from conftest import REPO

import tcx.core.views.cache as cache
from tcx.core.ingest.recording import load_recording
from tcx.core.model import build_model
from tcx.core.views.report import build_report
from tcx.core.views.run_facts import run_facts

NANO = REPO / "fixtures" / "recordings" / "nano_train_inductor.tcx.gz"  # Inductor: cache lookups, phases


def test_a_report_reads_the_cache_lookups_once(monkeypatch):
    calls = []
    lookups = cache._lookups
    monkeypatch.setattr(cache, "_lookups", lambda *a: calls.append(a) or lookups(*a))
    report = build_report(build_model(load_recording(NANO)))
    assert len(calls) == 1  # was 2: the report built every run fact to show their compile time
    assert report.views["cache"].runs[0].lookups  # the recording's lookups reached the report
    assert report.compile_time_s["total"] > 0
    assert report.compile_time_s == run_facts(report.model, report.selection).compile_time_s
