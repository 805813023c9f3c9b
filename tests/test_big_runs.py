"""Big runs (issue 13): nothing cut, highlighting only when shown, identical sources once, the
index and the selectors on every view, lazy payloads, the HTML report folded, ranks in a pool.

Torch-free: real TORCH_TRACE logs from fixtures/ (and copies of them relabelled as ranks, as
bench/make_ranks.py makes). No timing here: speed is measured by `make bench`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gzip
import io
import itertools
import json
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import torch_trace_records
from rich.console import Console

from tcx.core.ingest.trace_events import unpack
from tcx.core.ingest.trace_log import load_trace
from tcx.core.model import build_model
from tcx.core.selection import whole_run
from tcx.core.selectors import matches
from tcx.core.views.codegen import build_codegen
from tcx.core.views.rank_pool import rank_report
from tcx.core.views.ranks import multi_rank_report
from tcx.renderers.code_block import CONTINUATION
from tcx.renderers.codegen_terminal import render_codegen
from tcx.renderers.console import THEME

REPO = Path(__file__).resolve().parent.parent
INPUTS = REPO / "fixtures" / "torch-trace" / "tlparse-tests" / "inputs"
SIMPLE = INPUTS / "simple.log"  # a real Inductor run: two Triton kernels with 600-column lines
MULTI = INPUTS / "multi_rank_logs"  # four real rank logs, 24 compile ids
DEMO_GZ = REPO / "tests" / "data" / "traces" / "torch2.13_eager_demo.log.gz"
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def tcx(*args: str) -> tuple[int, str, str]:
    """Run the CLI in-process as a user would (stdout is not a terminal): (exit code, out, err)."""
    from tcx.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            main(list(args))
        except SystemExit as exc:
            return int(exc.code or 0), out.getvalue(), err.getvalue()
    return 0, out.getvalue(), err.getvalue()


def longest_kernel_line(log: Path) -> str:
    """The longest line of a kernel's decorator (`triton_meta=...`) in torch's own output code, read
    by the tests' tiny parser (conftest.py), not tcx's."""
    code = [p for name, _, p in torch_trace_records(log) if name == "inductor_output_code"]
    return max((ln for p in code for ln in p.splitlines() if "triton_meta=" in ln), key=len)


def same_ranks(tmp_path: Path, log: Path, n: int = 2) -> Path:
    """`n` copies of one real log as rank logs (identical ranks: every kernel repeats)."""
    folder = tmp_path / "ranks"
    folder.mkdir()
    for rank in range(n):
        shutil.copy(log, folder / f"dedicated_log_torch_trace_rank_{rank}.log")
    return folder


# --- nothing is cut -------------------------------------------------------------------------------


def test_code_lines_are_printed_whole_when_not_a_terminal():
    longest = longest_kernel_line(SIMPLE)
    assert len(longest) > 300  # triton_meta=...: wider than any terminal
    code, out, _ = tcx("codegen", str(SIMPLE), "--width", "80")
    assert code == 0
    assert longest in out.splitlines() or any(line.strip() == longest.strip() for line in out.splitlines())


@pytest.mark.parametrize("color", [False, True])
def test_code_lines_wrap_with_a_continuation_mark_on_a_terminal(color):
    longest = longest_kernel_line(SIMPLE).strip()
    buf = io.StringIO()
    console = Console(
        file=buf, force_terminal=True, width=70, theme=THEME, color_system="truecolor" if color else None
    )
    render_codegen(build_codegen(build_model(load_trace(SIMPLE), "trace")), console)
    lines = ANSI.sub("", buf.getvalue()).splitlines()
    assert all(len(line) <= 70 for line in lines)
    assert longest in [joined(lines, i) for i, line in enumerate(lines) if line.strip()]  # nothing lost
    assert sum(line.lstrip().startswith(CONTINUATION) for line in lines) > len(longest) // 70


def joined(lines: list[str], start: int) -> str:
    """The line that starts at `start`, with its continuation lines put back."""
    pieces = [lines[start].strip()]
    for line in lines[start + 1 :]:
        if not line.lstrip().startswith(CONTINUATION):
            break
        pieces.append(line.lstrip()[len(CONTINUATION) :])
    return "".join(pieces)


def test_pygments_runs_only_when_colour_is_on_and_only_for_what_is_printed(monkeypatch):
    from rich.syntax import Syntax

    calls: list[str] = []
    original = Syntax.highlight

    def counting(self, code, line_range=None):
        calls.append(code)
        return original(self, code, line_range)

    monkeypatch.setattr(Syntax, "highlight", counting)
    model = build_model(load_trace(SIMPLE), "trace")
    render_codegen(build_codegen(model), Console(file=io.StringIO(), theme=THEME, color_system=None))
    assert calls == []  # no colour: no lexer at all
    dropout = dataclasses.replace(whole_run(model), kernel="triton_poi_fused_native_dropout_0")
    one = build_codegen(model, dropout)
    render_codegen(
        one, Console(file=io.StringIO(), theme=THEME, force_terminal=True, color_system="truecolor")
    )
    assert len(calls) == 1 and "triton_poi_fused_native_dropout_0" in calls[0]


def test_an_identical_kernel_is_printed_once_then_referred_to(tmp_path):
    folder = same_ranks(tmp_path, SIMPLE)
    code, out, _ = tcx("codegen", str(folder), "--all")
    assert code == 0
    longest = longest_kernel_line(SIMPLE).strip()
    assert sum(line.strip() == longest for line in out.splitlines()) == 1
    prose = " ".join(out.split())
    assert (
        "(same source as kernel triton_poi_fused_native_dropout_0 of compile rank0:0/0 · inference" in prose
    )


class _Sink(io.StringIO):
    """A console's file that notes how much had been written when each compile was parsed."""

    def __init__(self) -> None:
        super().__init__()
        self.written_at_parse: list[int] = []

    def spy(self, fn: Any) -> Any:
        def parse(*args: Any, **kwargs: Any) -> Any:
            self.written_at_parse.append(len(self.getvalue()))
            return fn(*args, **kwargs)

        return parse


def _render(render: Any, view: Any, sink: io.StringIO) -> None:
    render(view, Console(file=sink, width=100, theme=THEME, color_system=None))


@pytest.mark.parametrize("which", ["codegen", "guards"])
def test_each_compile_is_parsed_after_the_one_before_was_printed_and_none_is_kept(monkeypatch, which):
    """Streaming: compile k is parsed only once compile k-1 is on the screen, what a user sees is
    exactly what the view prints when every compile is parsed before printing, and no parsed
    compile is kept (`--all` on a 1 GB log holds one compile at a time)."""
    from tcx.core.model import guard_sets
    from tcx.core.views import codegen as codegen_view
    from tcx.core.views import guards
    from tcx.renderers.guards_terminal import render_guards

    model = build_model(load_trace(MULTI), "trace")
    if which == "codegen":
        module, parser, build, render, items = (
            codegen_view,
            "parse_kernels",
            build_codegen,
            render_codegen,
            "sections",
        )
    else:
        module, parser, build, render, items = (
            guard_sets,  # the model's one guard-tree parser, called when the view reaches a tree
            "parse_guard_tree",
            guards.build_guards,
            render_guards,
            "entries",
        )
    whole = build(model)
    parsed_first = dataclasses.replace(whole, **{items: list(getattr(whole, items))})
    expected = io.StringIO()
    _render(render, parsed_first, expected)

    sink = _Sink()
    monkeypatch.setattr(module, parser, sink.spy(getattr(module, parser)))
    streamed = build(model)
    assert sink.written_at_parse == []  # building parses nothing
    _render(render, streamed, sink)
    marks = sink.written_at_parse
    assert len(marks) == len(getattr(streamed, items)) > 5
    assert marks[0] > 0  # the header is out before the first compile is parsed
    assert all(a < b for a, b in itertools.pairwise(marks))  # each compile printed before the next is parsed
    assert sink.getvalue() == expected.getvalue()
    parsed = len(marks)
    _render(render, streamed, sink)  # printing keeps no parsed compile: a second print parses each again
    assert len(sink.written_at_parse) == 2 * parsed


# --- summary first, and the same selectors on every view -----------------------------------------


def test_a_big_run_prints_an_index_with_a_command_per_compile():
    code, out, _ = tcx("graphs", str(MULTI))
    assert code == 0
    rows = [line for line in out.splitlines() if re.search(r" --compile \d+/\d+$", line)]
    assert len(rows) == 24  # one per compile id of the four ranks
    row = next(r for r in rows if r.startswith("rank1:0/3 "))
    assert row.rstrip().endswith(f"tcx graphs {MULTI} --rank 1 --compile 0/3")
    assert "Dynamo's graph" not in out  # no graph printed: the index stands in for them
    code, every, _ = tcx("graphs", str(MULTI), "--all")
    assert code == 0 and every.count("Dynamo's graph") == 24 and "drill down" not in every


def test_a_row_command_drills_into_that_compile():
    code, out, _ = tcx("graphs", str(MULTI), "--rank", "1", "--compile", "0/3", "--format", "json")
    assert code == 0
    doc = json.loads(out)
    assert doc["selection"]["compile_ids"] == ["rank1:0/3"]
    assert [c["compile_id"] for c in doc["compiles"]] == ["rank1:0/3"]
    code, text, _ = tcx("graphs", str(MULTI), "--rank", "1", "--compile", "0/3")
    assert text.count("Dynamo's graph") == 1 and "drill down" not in text


def test_a_small_run_prints_everything_without_an_index():
    code, out, _ = tcx("codegen", str(SIMPLE))
    assert code == 0 and "drill down" not in out and "triton_poi_fused_native_dropout_0" in out


@pytest.mark.parametrize(
    "view", ["explain", "recompiles", "guards", "graphs", "codegen", "bytecode", "trace", "fusion", "report"]
)
def test_every_view_takes_the_same_selectors(view):
    code, out, err = tcx(
        view, str(MULTI), "--rank", "1", "--compile", "0/1-0/3", "--compile", "0/9", "--format", "json"
    )
    assert code == 0, err
    assert json.loads(out)["selection"]["compile_ids"] == ["rank1:0/1", "rank1:0/2", "rank1:0/3", "rank1:0/9"]


def test_kernel_selects_the_compiles_that_generated_it():
    code, out, _ = tcx("graphs", str(MULTI), "--kernel", "cpp_fused_sum", "--format", "json")
    assert code == 0
    ids = json.loads(out)["selection"]["compile_ids"]
    every = json.loads(tcx("codegen", str(MULTI), "--format", "json")[1])
    expected = sorted({k["compile_id"] for k in every["kernels"] if "cpp_fused_sum" in k["name"]})
    assert sorted(ids) == expected and 0 < len(expected) < len(every["selection"]["compile_ids"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--compile", "9/9"), "compile '9/9' matches no compile"),
        (("--rank", "7"), "no rank 7 in this input"),
        (("--kernel", "no_such_kernel"), "kernel 'no_such_kernel' matches no compile"),
    ],
)
def test_a_selector_that_matches_nothing_is_a_usage_error(args, message):
    code, _, err = tcx("guards", str(MULTI), *args)
    assert code == 2 and message in err and "Traceback" not in err


def test_compile_ranges():
    assert matches("3/0-3/4", "3/2") and matches("3/0-3/4", "3/4")
    assert not matches("3/0-3/4", "3/5") and not matches("3/0-3/4", "4/0")
    assert matches("3/1-4", "3/3") and not matches("3/1-4", "3/0")
    assert matches("0/1", "rank2:0/1") and not matches("rank1:0/1", "rank2:0/1")
    assert matches("!0/1/0", "!0/1/0") and not matches("1/0-1/9", "!0/1/5")


# --- lazy payloads -------------------------------------------------------------------------------


def awkward_copy(tmp_path: Path) -> Path:
    """simple.log with what real files bring: CRLF line ends, a foreign line and a blank line
    inside a payload, a payload whose checksum fails, no newline at the end."""
    lines = SIMPLE.read_text(encoding="utf-8").splitlines()
    payload_at = next(i for i, line in enumerate(lines) if line.startswith("\t") and i > 20)
    lines.insert(payload_at + 1, "not a trace line")
    lines.insert(payload_at + 3, "")
    damaged = next(i for i, line in enumerate(lines) if line.startswith("\t") and i > payload_at + 40)
    lines[damaged] = lines[damaged] + " (changed)"
    path = tmp_path / "awkward.log"
    path.write_bytes("\r\n".join(lines).encode("utf-8"))
    return path


@pytest.mark.parametrize("which", ["simple", "multi_rank", "demo_gz", "awkward", "awkward_gz"])
def test_lazy_payloads_read_the_same_text_as_eager_ones(tmp_path, which):
    path = {"simple": SIMPLE, "multi_rank": MULTI, "demo_gz": DEMO_GZ}.get(which)
    if path is None:
        path = awkward_copy(tmp_path)
        if which == "awkward_gz":
            path.with_suffix(".gz").write_bytes(gzip.compress(path.read_bytes()))
            path = path.with_suffix(".gz")
    lazy, eager = load_trace(path), load_trace(path, lazy=False)
    assert lazy.problems == eager.problems
    if which.startswith("awkward"):
        assert any("checksum" in p for p in lazy.problems) and any(
            "not a trace record" in p for p in lazy.problems
        )
    assert len(lazy.events) == len(eager.events) > 0
    refs = 0
    for a, b in zip(lazy.events, eager.events, strict=True):
        assert a["md"] == b["md"] and a["source_line"] == b["source_line"]
        refs += not isinstance(a["payload"], (str, bytes, type(None)))
        assert unpack(a["payload"]) == unpack(b["payload"])
    assert refs > 0  # the lazy events hold references, not text


def test_checksums_hold_for_payloads_with_tabs_of_their_own(tmp_path):
    """The scan drops every tab of a payload at once when the only tabs are the line indents;
    a tab inside a line (Python source, a TSV table) must survive into what is hashed and read."""
    import hashlib

    def record(line: int, payload: str, md5: str | None = None) -> str:
        md5 = md5 or hashlib.md5(payload.encode("utf-8")).hexdigest()
        head = f"V1206 15:18:15.925000 1500233 torch/_dynamo/utils.py:{line}] "
        body = "".join(f"\t{part}\n" for part in payload.split("\n"))
        return (
            head
            + json.dumps({"artifact": {"name": f"a{line}", "encoding": "string"}, "has_payload": md5})
            + "\n"
            + body
        )

    log = tmp_path / "tabs.log"
    log.write_text(
        record(1, "def f(x):\n\treturn x\t# a tab")  # tabs of its own, intact
        + record(2, "plain\nlines")  # indent tabs only, intact
        + record(3, "a\tb\nc", md5=hashlib.md5(b"ab\nc").hexdigest())  # the inner tab was dropped
        + record(4, "x\ny", md5="0" * 32),  # damaged
        encoding="utf-8",
    )
    lazy, eager = load_trace(log), load_trace(log, lazy=False)
    assert lazy.problems == eager.problems
    assert [p.split(": ", 1)[0] for p in lazy.problems] == ["tabs.log:7", "tabs.log:10"]
    assert unpack(lazy.events[0]["payload"]) == "def f(x):\n\treturn x\t# a tab\n"


def test_a_record_of_context_keys_only_is_kept_by_both_readers_and_skipped_by_the_model(tmp_path):
    """No event key, so no event name: the lazy reader's record is named "" (it was None, which its
    TraceEvent type does not allow: strict mypy over core/ingest found it), the eager reader keeps
    the dict, and the model built from either skips it."""
    head = "V1206 15:18:15.925000 1500233 torch/_dynamo/utils.py:1] "
    log = tmp_path / "keyless.log"
    log.write_bytes(
        (head + '{"frame_id": 0, "frame_compile_id": 0, "attempt": 0}\n').encode() + SIMPLE.read_bytes()
    )
    lazy, eager = load_trace(log), load_trace(log, lazy=False)
    assert len(lazy.events) == len(eager.events) == len(load_trace(SIMPLE).events) + 1
    assert lazy.events[0].name == "" and lazy.events[0]["md"] == eager.events[0]["md"]
    plain = build_model(load_trace(SIMPLE))
    for rec in (lazy, eager):
        model = build_model(rec)
        assert len(model.raw_trace_events()) == len(plain.raw_trace_events()) and not model.unknown_events


def test_a_tensors_device_is_answered_without_reading_its_metadata_again(monkeypatch):
    from tcx.core.ingest.trace_lazy import LazyMetadata

    model = build_model(load_trace(MULTI))
    lazy_tensors = [e for e in model.raw_trace_events() if e.name == "describe_tensor"]
    assert lazy_tensors and all(isinstance(e._md, LazyMetadata) for e in lazy_tensors)
    assert all(e.body_field("device") == e.body["device"] for e in lazy_tensors)
    monkeypatch.setattr(LazyMetadata, "load", lambda self: pytest.fail("metadata read from disk"))
    eager_model = build_model(load_trace(MULTI, lazy=False))
    assert model.status.device() == eager_model.status.device() == "cpu"


def test_a_lazy_log_holds_no_payload_text_in_memory_but_short_ones():
    from tcx.core.ingest.trace_lazy import INLINE_BYTES

    rec = load_trace(MULTI)
    held = [e["payload"] for e in rec.events if isinstance(e.get("payload"), (str, bytes))]
    refs = [e["payload"] for e in rec.events if e.get("payload") is not None and e["payload"] not in held]
    assert held and refs  # this log has both
    assert all(len(p) <= INLINE_BYTES for p in held)
    assert all(len(r) > INLINE_BYTES for r in refs if not isinstance(r, (str, bytes)))


# --- the HTML report -----------------------------------------------------------------------------


def test_the_html_report_folds_code_and_stores_identical_text_once(tmp_path):
    folder = same_ranks(tmp_path, SIMPLE)
    page = tmp_path / "report.html"
    code, _, err = tcx("report", str(folder), "--format", "html", "-o", str(page))
    assert code == 0, err
    html = page.read_text(encoding="utf-8")
    assert "<script" not in html.lower()
    marker = "def triton_poi_fused_native_dropout_0("
    assert html.count(marker) == 1  # two ranks, one copy
    assert re.search(r"<details id=\"code-\d+\"><summary>kernel triton_poi_fused_native_dropout_0", html)
    assert "the same text as above</a>" in html or "(same source as kernel" in html
    assert "tcx-fold-" not in html


# --- many ranks ----------------------------------------------------------------------------------


def made_ranks(tmp_path: Path, n: int) -> Path:
    sys.path.insert(0, str(REPO / "bench"))
    try:
        import make_ranks
    finally:
        sys.path.pop(0)
    return make_ranks.write_ranks(tmp_path / "ranks", ranks=n, diverging=5)


@pytest.mark.parametrize("source", ["fixture", "made"])
def test_the_rank_pool_gives_the_serial_answer(tmp_path, source):
    folder = MULTI if source == "fixture" else made_ranks(tmp_path, 8)
    model = build_model(load_trace(folder), "trace")
    pooled, serial = rank_report(model, workers=2), multi_rank_report(model)
    assert [s.to_json() for s in pooled[0]] == [s.to_json() for s in serial[0]]
    assert pooled[1] is not None and pooled[1].to_json() == serial[1].to_json()
    if source == "made":
        assert [g["ranks"] for g in pooled[1].groups] == [[0, 1, 2, 3, 4, 6, 7], [5]]


def test_the_rank_table_is_never_cut(tmp_path):
    folder = made_ranks(tmp_path, 12)
    code, out, _ = tcx("explain", str(folder), "--width", "40")
    assert code == 0
    assert "  rank  compiles  graphs  graph breaks  recompiles  kernels  failed  compile s" in out
    assert "ranks 0-4, 6-11:" in out  # ranks as ranges


def test_shared_metadata_strings_are_stored_once_and_read_the_same():
    from tcx.core.ingest.trace_lazy import LAZY_METADATA, scan_file

    strings: dict[str, str] = {}
    shared_events, _ = scan_file(SIMPLE, None, strings)
    plain, _ = scan_file(SIMPLE, None)
    assert [e["md"] for e in shared_events] == [e["md"] for e in plain]
    kept = [e for e in shared_events if e.name not in LAZY_METADATA]  # the rest is read from disk
    keys = [k for e in kept for k in e["md"] if k == "frame_id"]
    assert len(keys) > 10 and all(k is keys[0] for k in keys)  # one string object, not one per record
    unshared = [k for e in plain for k in e["md"] if k == "frame_id"]
    assert not all(k is unshared[0] for k in unshared)
