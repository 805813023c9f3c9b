"""`tcx cache` counts what the warm start really looked up, and its cost sentence follows the data.

fixtures/programs/cache/restart_float.py, run twice as a user would (`python prog.py` with
TORCH_TRACE, one private Inductor cache): `lookup` restarts once (a symbolic float Inductor cannot
tensorify) so its abandoned first attempt looked the caches up and missed in both runs; `scaled`
bakes in a constant that the second run changes, so it misses for real. The truth is torch's own
two logs, read here; tcx reads the same two logs (`tcx cache COLD WARM`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from conftest import PROGRAMS, REPO, run_tcx, torch_trace_records

pytestmark = [pytest.mark.torch, pytest.mark.inductor]

PROGRAM = PROGRAMS / "cache" / "restart_float.py"
_LOOKUP = re.compile(r"^(fx_graph|aotautograd)_cache_(hit|miss|bypass)$")


def plain_run(trace, cache, **env: str) -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "TORCHINDUCTOR_", "TCX_"))}
    proc = subprocess.run(
        [sys.executable, str(PROGRAM)],
        env={**clean, "TORCH_TRACE": str(trace), "TORCHINDUCTOR_CACHE_DIR": str(cache), **env},
        capture_output=True,
        text=True,
        timeout=900,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def lookups(trace) -> list[tuple[str, int, str, bool]]:
    """(compile id, attempt, state, abandoned) of each cache lookup torch logged: a lookup is
    abandoned when a later attempt of its compile exists (torch restarted the compile)."""
    records = torch_trace_records(trace)
    last: dict[str, int] = {}
    for _, md, _ in records:
        if "frame_id" in md and "frame_compile_id" in md:
            cid = f"{md['frame_id']}/{md['frame_compile_id']}"
            last[cid] = max(last.get(cid, 0), md.get("attempt") or 0)
    out = []
    for name, md, _ in records:
        m = _LOOKUP.match(md["artifact"]["name"]) if name == "artifact" else None
        if m:
            cid = f"{md['frame_id']}/{md['frame_compile_id']}"
            out.append((cid, md["attempt"], m.group(2), md["attempt"] < last[cid]))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("restart_float")
    plain_run(tmp / "cold", tmp / "cache")
    plain_run(tmp / "warm", tmp / "cache", TCX_FIXTURE_SCALE="3.0")
    proc = run_tcx("cache", str(tmp / "cold"), str(tmp / "warm"), "--format", "json", env={"COLUMNS": "120"})
    assert proc.returncode == 0, proc.stderr
    text = run_tcx("cache", str(tmp / "cold"), str(tmp / "warm"), env={"COLUMNS": "120", "NO_COLOR": "1"})
    return json.loads(proc.stdout), text.stdout, lookups(tmp / "warm")


def test_abandoned_attempts_lookups_are_shown_not_counted(runs):
    doc, text, warm = runs
    abandoned = [lk for lk in warm if lk[3]]
    counted = [lk for lk in warm if not lk[3]]
    assert abandoned and all(state == "miss" for _, _, state, _ in abandoned)  # they can never hit
    assert doc["abandoned_lookup_count"] == len(abandoned)
    assert doc["cache_lookup_count"] == len(counted)
    assert doc["cache_miss_count"] == sum(1 for _, _, state, _ in counted if state != "hit")
    assert doc["cache_hit_count"] == sum(1 for _, _, state, _ in counted if state == "hit")
    shown = [
        lk
        for c in doc["compiles"]
        for r in c["runs"]
        if r["run"] == "B"
        for lk in r["lookups"]
        if lk["restarted"]
    ]
    assert len(shown) == len(abandoned)
    assert all("_tensorify_python_scalars" in lk["restarted"] and lk["attempt"] == 0 for lk in shown)
    assert f"{len(abandoned)} more by restarted attempts, not counted" in text
    assert "(attempt 0, restarted)" in text


def test_the_cost_sentence_follows_the_data(runs):
    doc, text, warm = runs
    counted = [lk for lk in warm if not lk[3]]
    missed = sum(1 for _, _, state, _ in counted if state != "hit")
    per_compile: dict[str, set[str]] = {}
    for cid, _, state, _ in counted:
        per_compile.setdefault(cid, set()).add(state)
    all_hit = [cid for cid, states in per_compile.items() if states == {"hit"}]
    some_missed = [cid for cid, states in per_compile.items() if states != {"hit"}]
    assert all_hit and some_missed and missed  # the data is mixed: the sentence must say so
    kinds = {row["compile_id"]: row["kind"] for row in doc["fully_warm"]}
    assert {cid for cid, kind in kinds.items() if kind == "measured"} == set(all_hit)
    assert {cid for cid, kind in kinds.items() if kind == "estimated"} == set(some_missed)
    summary = doc["fully_warm_summary"]
    assert f"B missed or bypassed {missed} of {len(counted)} lookups" in summary
    assert f"measured where every lookup of a compile hit: {len(all_hit)} compile" in summary
    assert f"estimated where B missed or bypassed: {len(some_missed)} compile" in summary
    assert summary in " ".join(text.split())
