"""Reading TORCH_TRACE logs: every tlparse test log (torch 2.4-2.9) and tcx's own torch 2.13 logs.

Torch-free. Where tlparse is installed, tcx's compile ids and graph-break counts are compared
with what tlparse reports for the same log.
"""

from __future__ import annotations

import gzip
import json
import re
import subprocess
from pathlib import Path

import pytest
from conftest import TRACE_FIXTURES, tool

from tcx.core.errors import EXIT_INPUT, InputError
from tcx.core.ingest.trace_log import load_trace
from tcx.core.model import build_model
from tcx.core.views.explain import explain, to_json

INPUTS = TRACE_FIXTURES / "tlparse-tests" / "inputs"
MULTI_RANK = INPUTS / "multi_rank_logs"
SAVED = Path(__file__).parent / "data" / "traces"

FIXTURE_LOGS = sorted(
    str(p.relative_to(INPUTS)) for p in INPUTS.rglob("*") if p.is_file() and p.suffix in (".log", ".txt")
)
SAVED_LOGS = sorted(p.name for p in SAVED.glob("*.log.gz"))
# tlparse reports the same checksum failure for these (export.log's payload lost its blank tail lines).
CHECKSUM_PROBLEMS = {"simple_corrupted_json.log": 13, "export.log": 60, "export_guard_added.log": 39}


def test_the_fixture_logs_are_there():
    assert INPUTS.is_dir(), f"missing trace fixtures: {INPUTS}"
    assert len(FIXTURE_LOGS) >= 12, FIXTURE_LOGS
    assert {"simple.log", "simple_corrupted_json.log", "comp_failure.log"} <= set(FIXTURE_LOGS)
    assert len(list(MULTI_RANK.glob("*.log"))) == 4
    assert len(SAVED_LOGS) == 4


def _summary(path: Path) -> tuple:
    rec = load_trace(path)
    model = build_model(rec, "trace")
    doc = to_json(explain(model))
    json.dumps(doc)  # the JSON contract serialises for every log
    return rec, model, doc


@pytest.mark.parametrize("name", FIXTURE_LOGS)
def test_every_tlparse_log_ingests(name):
    rec, model, doc = _summary(INPUTS / name)
    assert rec.events and all(e["kind"] == "trace" and isinstance(e["md"], dict) for e in rec.events)
    assert all(isinstance(e["source_line"], int) for e in rec.events)
    assert len(model.raw_trace_events()) == len(rec.events)
    base = Path(name).name
    if base in CHECKSUM_PROBLEMS:
        assert rec.problems == [
            f"{base}:{CHECKSUM_PROBLEMS[base]}: payload does not match its checksum (corrupted?)"
        ]
    else:
        assert rec.problems == []
    assert doc["schema"] == "tcx.explain/1"
    assert doc["compile_count"] == len(model.compiles)


# log: (compile ids, graph_count, recompile_count)
EXPECTED = {
    "simple.log": ({"0/0"}, 1, 0),
    "comp_metrics.log": ({"0/0", "1/0", "2/0"}, 3, 0),
    "comp_failure.log": ({"0/0"}, 1, 0),
    "cache_hit_miss.log": ({"0/0", "1/0"}, 6, 0),
    "artifacts.log": ({"0/0"}, 1, 0),
    "export.log": (set(), 0, 0),
    "multi_rank_logs/dedicated_log_torch_trace_rank_1.log": ({f"0/{i}" for i in range(15)}, 15, 14),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_counts_of_known_logs(name):
    ids, graphs, recompiles = EXPECTED[name]
    _, model, doc = _summary(INPUTS / name)
    assert set(model.compiles) == ids
    assert doc["graph_count"] == graphs
    assert doc["recompile_count"] == recompiles
    assert doc["graph_break_count"] == 0  # torch before 2.6 wrote no dynamo_graph_break_reason


def test_torch_2_4_restarts_and_resume_frames():
    _, model, _ = _summary(INPUTS / "comp_metrics.log")
    c = model.compiles
    assert c["0/0"].co_name == "fn"
    assert c["1/0"].co_name == "torch_dynamo_resume_in_fn_at_9551" and c["1/0"].is_resume
    assert c["0/0"].restart_reasons == [
        "'skip function graph_break in file /data/users/jjwu/a/pytorch/torch/_dynamo/decorators.py'"
    ]


def test_backend_failure_is_read_from_metrics():
    _, model, _ = _summary(INPUTS / "comp_failure.log")
    comp = model.compiles["0/0"]
    assert comp.fail_type == "BackendCompilerFailed"
    assert "broken_backend" in comp.fail_reason


def test_export_log_events_are_read_by_the_export_view_and_unknown_ones_kept(tmp_path):
    """Export's own events were unknown until the export view read them (core/model/consumers.py
    ExportsConsumer); an event no consumer declares is still kept and counted as unknown."""
    _, _, doc = _summary(INPUTS / "export.log")
    assert doc["unknown_events"] == {}
    log = tmp_path / "future.log"
    future = json.dumps({"a_future_event": {"x": 1}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0})
    log.write_text((INPUTS / "export.log").read_text() + f"V1201 10:00:00.000000 1 x.py:1] {future}\n")
    _, model, doc = _summary(log)
    assert doc["unknown_events"] == {"a_future_event": 1}
    assert [ev.name for ev in model.raw_trace_events().named("a_future_event")] == ["a_future_event"]


def test_multi_rank_directory():
    rec = load_trace(MULTI_RANK)
    assert len(rec.header["files"]) == 4
    assert {e["md"]["rank"] for e in rec.events} == {0, 1, 2, 3}
    per_file = sum(len(load_trace(p).events) for p in MULTI_RANK.glob("*.log"))
    assert len(rec.events) == per_file
    model = build_model(rec, "trace")
    assert model.graph_count == 1 + 15 + 1 + 7
    assert rec.problems == []


def test_corrupted_payload_is_reported_and_the_rest_is_read():
    good, good_model, good_doc = _summary(INPUTS / "simple.log")
    bad, bad_model, bad_doc = _summary(INPUTS / "simple_corrupted_json.log")
    assert good.problems == []
    assert len(bad.problems) == 1 and bad.problems[0].startswith("simple_corrupted_json.log:13: ")
    assert len(bad.events) == len(good.events)
    assert set(bad_model.compiles) == set(good_model.compiles)
    for key in ("graph_count", "compile_count", "graph_break_count", "recompile_count", "frames_compiled"):
        assert bad_doc[key] == good_doc[key], key
    assert bad_doc["problems"] == bad.problems


def test_corrupted_metadata_line_is_skipped_with_file_and_line(tmp_path):
    lines = (INPUTS / "simple.log").read_text().splitlines(keepends=True)
    target = next(i for i, ln in enumerate(lines) if '"dynamo_output_graph"' in ln)
    lines[target] = lines[target].replace('{"dynamo_output_graph"', '{"dynamo_output_graph" ', 1)[:-20] + "\n"
    broken = tmp_path / "broken.log"
    broken.write_text("".join(lines))
    rec = load_trace(broken)
    assert len(rec.problems) == 1
    assert re.fullmatch(rf"broken\.log:{target + 1}: corrupted JSON \(.+\)", rec.problems[0])
    assert len(rec.events) == len(load_trace(INPUTS / "simple.log").events) - 1
    assert build_model(rec).graph_count == 0  # the one graph was on the broken line
    after = [e for e in rec.events if e["source_line"] > target + 1]
    assert any("compilation_metrics" in e["md"] for e in after)  # records after it are read


def test_log_cut_off_mid_payload_keeps_earlier_records(tmp_path):
    data = (INPUTS / "simple.log").read_bytes()
    cut = tmp_path / "cut.log"
    cut.write_bytes(data[: len(data) // 2])
    rec = load_trace(cut)
    assert 0 < len(rec.events) < len(load_trace(INPUTS / "simple.log").events)
    assert rec.problems and "checksum" in rec.problems[-1]


def test_gzipped_log_reads_like_the_plain_one(tmp_path):
    gz = tmp_path / "simple.log.gz"
    gz.write_bytes(gzip.compress((INPUTS / "simple.log").read_bytes()))
    plain, zipped = load_trace(INPUTS / "simple.log"), load_trace(gz)
    assert zipped.events == plain.events
    assert zipped.problems == []


def test_truncated_gzip_reports_and_keeps_what_it_could_read(tmp_path):
    data = gzip.compress((INPUTS / "cache_hit_miss.log").read_bytes())
    gz = tmp_path / "cut.log.gz"
    gz.write_bytes(data[: len(data) // 2])
    rec = load_trace(gz)
    assert rec.events
    assert any(p.startswith("cut.log.gz: cannot read") for p in rec.problems)


@pytest.mark.parametrize(
    ("content", "detail"),
    [
        (b"", "no trace events"),
        (bytes(range(256)) * 64, "not a trace record"),
        (b"\x1f\x8b" + bytes(range(200)), "cannot read"),
        (b"name,value\nalpha,1\nbeta,2\n", "not a trace record"),
        (b'{"kind": "header", "format": "something-else"}\n', "not a trace record"),
        (b"import torch\n\nprint('hello')\n", "not a trace record"),
    ],
    ids=["empty", "binary", "bad-gzip", "csv", "json", "python"],
)
def test_foreign_files_are_input_errors(tmp_path, content, detail):
    path = tmp_path / "input.log"
    path.write_bytes(content)
    with pytest.raises(InputError) as info:
        load_trace(path)
    assert info.value.exit_code == EXIT_INPUT
    assert str(path) in info.value.message
    assert detail in info.value.message
    assert "TORCH_TRACE" in info.value.message


def test_missing_file_and_empty_directory_are_input_errors(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_trace(tmp_path / "nope.log")
    with pytest.raises(InputError, match="empty directory"):
        load_trace(tmp_path)


def test_many_bad_lines_are_summarised_not_listed(tmp_path):
    good = (INPUTS / "comp_metrics.log").read_text()
    path = tmp_path / "noisy.log"
    path.write_text("".join(f"garbage {i}\n" for i in range(50)) + good)
    rec = load_trace(path)
    assert len(rec.problems) == 4
    assert rec.problems[-1] == "noisy.log: 50 lines in all were not trace records"
    assert len(rec.events) == len(load_trace(INPUTS / "comp_metrics.log").events)


# --- torch 2.13 logs saved by the project -------------------------------------------------------


def test_torch_2_13_demo_log():
    rec, _, doc = _summary(SAVED / "torch2.13_eager_demo.log.gz")
    assert rec.problems == []
    assert doc["torch_version"] == "2.13.0+cpu"
    assert (doc["graph_count"], doc["graph_break_count"], doc["unique_graph_break_count"]) == (7, 5, 3)
    assert (doc["compile_count"], doc["recompile_count"]) == (8, 4)
    breaks = {(b["type"], b["gb_id"], b["line"], b["occurrences"]) for b in doc["graph_breaks"]}
    assert breaks == {
        ("Data-dependent branching", "GB0170", 13, 2),
        ("Unsupported Tensor.item() call with capture_scalar_outputs=False", "GB0124", 16, 2),
        ("Failed to trace builtin operator", "GB0059", 15, 1),
    }
    assert doc["frames_compiled"] == ["g"]


def test_torch_2_13_loop_log_skips_the_frame():
    _, _, doc = _summary(SAVED / "torch2.13_eager_loop_break.log.gz")
    assert doc["graph_count"] == 0 and doc["failed_frame_count"] == 1
    assert doc["failed_frames"][0]["kind"] == "graph break inside a loop"
    (site,) = doc["graph_breaks"]
    assert site["frame_skipped"] and site["caused"] == [{"type": "graph break in loop", "gb_id": "GB7000"}]


def test_torch_2_13_library_log_names_the_entry_line():
    _, _, doc = _summary(SAVED / "torch2.13_eager_library_break.log.gz")
    (site,) = doc["graph_breaks"]
    assert site["file"].endswith("copy.py") and site["in_library"]
    assert site["entered_from"]["file"].endswith("library_break.py")
    assert site["entered_from"]["line"] == 14


# --- compared with tlparse ------------------------------------------------------------------------


def _tlparse_view(log: Path, out: Path) -> tuple[set[str], int, int]:
    exe = tool("tlparse", "a dev dependency: pip install -e '.[dev]'")
    proc = subprocess.run(
        [exe, str(log), "-o", str(out), "--no-browser", "--overwrite"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    directory = json.loads((out / "compile_directory.json").read_text())
    ids = set()
    for key in directory:
        m = re.fullmatch(r"\[(.+?)(?:_\d+)?\]", key)  # "[0/1_2]" is compile 0/1, attempt 2
        assert m, key
        ids.add(m.group(1))
    ids.discard("-/-")
    breaks = sum(
        1
        for entry in directory.values()
        for art in entry["artifacts"]
        if art["name"].startswith("dynamo_graph_break_reason")
    )
    md5 = re.search(r"fail_payload_md5: (\d+)", proc.stderr)
    return ids, breaks, int(md5.group(1)) if md5 else 0


@pytest.mark.parametrize("name", FIXTURE_LOGS + [f"saved/{n}" for n in SAVED_LOGS])
def test_compile_ids_and_breaks_match_tlparse(name, tmp_path):
    if name.startswith("saved/"):
        log = tmp_path / name.removeprefix("saved/").removesuffix(".gz")
        log.write_bytes(gzip.decompress((SAVED / name.removeprefix("saved/")).read_bytes()))
    else:
        log = INPUTS / name
    ids, breaks, bad_payloads = _tlparse_view(log, tmp_path / "tl_out")
    rec = load_trace(log)
    model = build_model(rec, "trace")
    assert set(model.compiles) == ids
    assert len(model.graph_breaks) == breaks
    assert sum("checksum" in p for p in rec.problems) == bad_payloads


def test_large_payloads_stay_compressed_and_read_back_whole():
    """The eager reader (lazy=False): payloads over 4 KiB are kept zlib-compressed."""
    from tcx.core.ingest.trace_events import PACK_ABOVE, unpack

    rec = load_trace(INPUTS / "multi_rank_logs" / "dedicated_log_torch_trace_rank_1.log", lazy=False)
    packed = [e["payload"] for e in rec.events if isinstance(e.get("payload"), bytes)]
    assert packed and all(len(unpack(p)) > PACK_ABOVE for p in packed)
    assert sum(len(p) for p in packed) * 3 < sum(len(unpack(p)) for p in packed)
    model = build_model(rec, "trace")
    codes = [ev.payload for ev in model.raw_trace_events() if ev.name == "inductor_output_code"]
    assert codes and all("def call(" in code for code in codes)
