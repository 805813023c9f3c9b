"""What a user reads is whole and sized for its reader (issue 22, "nothing is cut", "right-sized").

Every registry view's text, printed as into a pipe 80 columns wide, from the session's real
tiny-Llama recording and from real TORCH_TRACE logs: no `…` without a count of what was left out
next to it, and no line that ends in spaces. The values torch logged (the global-state guard's JSON,
each recompile's failing guard) appear whole, in a pipe and on a terminal, where a wrapped line's
continuation starts with ↪. `fusion` fits 80 columns and prints an index on a big run; `tcx report
--format markdown` fits a PR comment, and its overview says what the text and HTML overviews say.
"""

from __future__ import annotations

import html
import io
import json
import re
from pathlib import Path

import pytest
from conftest import TRACE_FIXTURES, torch_trace_records
from rich.console import Console
from view_outputs import every_output

from tcx.core.ingest.recording import load_recording
from tcx.core.ingest.trace_log import load_trace
from tcx.core.model import RunModel, build_model
from tcx.core.selection import whole_run
from tcx.core.views import registry as views
from tcx.renderers.code_block import CONTINUATION
from tcx.renderers.console import THEME, make_console

WIDTH = 80
LOGS = TRACE_FIXTURES / "tlparse-tests" / "inputs"
# A `…` must have the count of what it stands for right after it: `… 5 more guard lines`,
# `…(+57 chars)`, `#2…#11 (9 calls)`, `… at least 3 more`.
UNMARKED_CUT = re.compile(r"…(?!.{0,12}?\d)")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
PR_COMMENT_BYTES = 60_000
# A view the PR-sized Markdown leaves out: its title, size and the command that prints it.
LEFT_OUT = r"^- \*\*(.+?)\*\*: (?:about )?[\d,]+ lines(?: \([\d,]+ KiB\))?: `tcx (\w+) (\S+)`"


def view_names() -> tuple[str, ...]:
    return tuple(v.name for v in views.VIEWS if v.name != "report")


def logical_lines(text: str) -> list[str]:
    """The lines as printed, each with its ↪ continuations put back after it."""
    out: list[str] = []
    for line in text.splitlines():
        if out and line.lstrip().startswith(CONTINUATION):
            out[-1] += line.lstrip()[len(CONTINUATION) :]
        else:
            out.append(line)
    return out


def unmarked_cuts_and_trailing_spaces(outputs: dict[str, str]) -> tuple[list[str], list[str]]:
    cuts, trailing = [], []
    for name, text in outputs.items():
        cuts += [f"{name}: {line}" for line in logical_lines(text) if UNMARKED_CUT.search(line)]
        lines = enumerate(text.splitlines(), start=1)
        trailing += [f"{name}:{n}: {line!r}" for n, line in lines if line != line.rstrip(" ")]
    return cuts, trailing


def squeezed(text: str) -> str:
    """The text as one string without whitespace or continuation marks: what a wrapped line says
    once its pieces are put back together."""
    return re.sub(r"\s+", "", ANSI.sub("", text).replace(CONTINUATION.strip(), ""))


def terminal_text(render, width: int) -> str:
    """What `render(console)` prints on a terminal `width` columns wide (colour on)."""
    buf = io.StringIO()
    render(Console(file=buf, force_terminal=True, width=width, theme=THEME, color_system="truecolor"))
    return ANSI.sub("", buf.getvalue())


def piped_text(render, width: int = WIDTH) -> str:
    buf = io.StringIO()
    render(make_console(buf, color=False, width=width))
    return buf.getvalue()


@pytest.fixture(scope="module")
def llama(recorded) -> tuple[RunModel, Path, Path]:
    """The session's tiny-Llama recording as a model, its file, and torch's own log of that run."""
    run = recorded("tiny_llama")
    return build_model(load_recording(run.recording)), run.recording, run.torch_trace


@pytest.fixture(scope="module")
def llama_report(llama):
    from tcx.core.views.report import build_report

    model, _, _ = llama
    return build_report(model, whole_run(model))


def tcx(*args: str) -> tuple[int, str]:
    """The CLI in-process, as a user would run it into a pipe: (exit code, stdout)."""
    import contextlib

    from tcx.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        try:
            main(list(args))
        except SystemExit as exc:
            return int(exc.code or 0), out.getvalue()
    return 0, out.getvalue()


# --- nothing is cut without saying so --------------------------------------------------------------


def test_no_view_of_a_recording_cuts_silently_or_pads_lines_when_piped(llama):
    model, _, _ = llama
    outputs = every_output(model, formats=("text",), only=view_names(), width=WIDTH)
    assert {name.split()[0] for name in outputs} >= {"explain", "guards", "trace", "fusion", "recompiles"}
    cuts, trailing = unmarked_cuts_and_trailing_spaces(outputs)
    assert not cuts, "\n".join(cuts[:20])
    assert not trailing, "\n".join(trailing[:20])


@pytest.mark.parametrize(
    "log", ["multi_rank_logs", "cache_hit_miss.log", "comp_failure.log", "simple.log", "artifacts.log"]
)
def test_no_view_of_a_log_cuts_silently_or_pads_lines_when_piped(log):
    model = build_model(load_trace(LOGS / log), "trace")
    outputs = every_output(model, formats=("text",), only=view_names(), width=WIDTH)
    cuts, trailing = unmarked_cuts_and_trailing_spaces(outputs)
    assert not cuts, "\n".join(cuts[:20])
    assert not trailing, "\n".join(trailing[:20])


def global_states(torch_trace: Path) -> set[str]:
    """The JSON each GLOBAL_STATE guard compares against, from torch's own guard dumps."""
    found = set()
    for name, _, payload in torch_trace_records(torch_trace):
        if name == "dynamo_cpp_guards_str":
            found.update(re.findall(r"___check_global_state\(\) against (\{.*\})", payload))
    return found


def test_a_guard_prints_whole_with_its_value_in_a_pipe_and_on_a_terminal(llama):
    from tcx.core.views.guards import build_guards
    from tcx.renderers.guards_terminal import render_guards

    model, _, torch_trace = llama
    states = global_states(torch_trace)
    assert states and all(len(s) > 300 for s in states)  # wider than any terminal: grad_mode is near the end
    view = build_guards(model, whole_run(model))
    piped = piped_text(lambda c: render_guards(view, c))
    on_terminal = terminal_text(lambda c: render_guards(view, c), 100)
    assert all(len(line) <= 100 for line in on_terminal.splitlines())
    for state in states:
        assert state in piped  # one line, whole
        assert squeezed(state) in squeezed(on_terminal)  # wrapped, every piece there


def recompile_reasons(torch_trace: Path) -> list[str]:
    """Each failing guard torch logged for a recompile, without its `# source` comment."""
    reasons = []
    for name, md, payload in torch_trace_records(torch_trace):
        if name == "artifact" and md["artifact"]["name"] == "recompile_reasons":
            items = json.loads(payload) if payload.lstrip().startswith("[") else [payload]
            reasons += [item.splitlines()[0].split("  #", 1)[0].strip() for item in items if item.strip()]
    return reasons


@pytest.mark.parametrize("width", [60, 80])
def test_each_failing_guard_prints_whole(llama, width):
    """The recompiles of torch's own log of the run, each failing guard in a table cell: at 60
    columns `'transformers.models.llama.modeling_llama.LlamaForCausalLM'>` is wider than the cell."""
    from tcx.core.views.recompiles import analyze
    from tcx.renderers.recompiles_terminal import render_recompiles

    _, _, torch_trace = llama
    reasons = recompile_reasons(torch_trace)
    assert reasons and max(len(r) for r in reasons) > width  # at least one must wrap
    model = build_model(load_trace(torch_trace), "trace")
    report = analyze(model, whole_run(model))
    for text in (
        piped_text(lambda c: render_recompiles(report, c), width),
        terminal_text(lambda c: render_recompiles(report, c), width),
    ):
        assert all(len(line) <= width for line in text.splitlines())
        assert not [ln for ln in logical_lines(text) if UNMARKED_CUT.search(ln)]
        whole = squeezed(text)
        missing = [r for r in reasons if squeezed(r) not in whole]
        assert not missing, missing


def test_the_trace_stack_column_wraps_with_a_continuation_mark(llama):
    from tcx.core.views.trace import build_trace
    from tcx.renderers.trace_terminal import render_trace

    model, _, _ = llama
    view = build_trace(model, whole_run(model))
    for text in (
        piped_text(lambda c: render_trace(view, c, limit=60)),
        terminal_text(lambda c: render_trace(view, c, limit=60), WIDTH),
    ):
        lines = text.splitlines()
        assert all(len(line) <= WIDTH for line in lines)
        stacks = [ln for ln in lines if re.match(r" +\d+ [A-Z_]+ ", ln) and "[" in ln and "]" not in ln]
        assert stacks  # some stacks are wider than the line: they go on below
        for n, line in enumerate(lines[:-1]):
            if line in stacks:  # the next line goes on with the stack, marked
                assert lines[n + 1].lstrip().startswith(CONTINUATION), lines[n : n + 2]


# --- right-sized output ------------------------------------------------------------------------------


def test_fusion_fits_80_columns_and_prints_an_index_on_a_big_run(llama):
    _, recording, _ = llama
    code, out = tcx("fusion", str(recording), "--width", str(WIDTH))
    assert code == 0 and "so here is an index" in out
    rows = [ln for ln in out.splitlines() if re.search(r" --compile \d+/\d+$", ln)]
    assert len(rows) >= 3
    code, every = tcx("fusion", str(recording), "--all", "--width", str(WIDTH))
    doc = json.loads(tcx("fusion", str(recording), "--format", "json")[1])
    nodes = sum(len(g["nodes"]) for g in doc["graphs"])
    lines = every.splitlines()
    assert code == 0 and nodes > 10
    assert all(len(line) <= WIDTH for line in lines), max(lines, key=len)
    # A scheduler node is a line or two, and so is each line of the user's that made it (a library
    # path wraps once); a row of a four-column table wrapped into 10-20 lines before.
    made_by = sum(
        len({(u["file"], u["line"]) for u in n["user_lines"]}) for g in doc["graphs"] for n in g["nodes"]
    )
    assert len(lines) <= 2 * (nodes + made_by) + 12 * len(doc["graphs"]) + 20


def torch_counts(torch_trace: Path) -> dict[str, int]:
    counts = {"graphs": 0, "graph breaks": 0}
    for name, md, _ in torch_trace_records(torch_trace):
        if name == "dynamo_output_graph":
            counts["graphs"] += 1
        elif name == "artifact" and md["artifact"]["name"] == "dynamo_graph_break_reason":
            counts["graph breaks"] += 1
    return counts


def test_the_markdown_report_fits_a_pr_comment_and_full_has_every_view(llama, llama_report):
    from tcx.renderers.report_output import report_markdown

    _, recording, torch_trace = llama
    md = report_markdown(llama_report, target=str(recording))
    size = len(md.encode("utf-8"))
    assert 10_000 < size < PR_COMMENT_BYTES
    for label, value in torch_counts(torch_trace).items():
        assert f"{label} **{value}**" in md  # the counts, as torch counted them
    assert "### Top problems" in md and "| compile | frame |" in md
    folded = re.findall(r"<details><summary>(.+?) \([\d,]+ lines\)</summary>", md)
    left_out = re.findall(LEFT_OUT, md, re.M)
    # each section of the report: Export is left out, as this program never exports (an empty section)
    titles = [g.title for g in llama_report.guide if not g.empty]
    assert "Export" not in titles and len(titles) == len(views.report_views()) - 1
    assert folded and left_out  # the tiny Llama's trace alone is over a megabyte
    assert sorted(folded + [t for t, _, _ in left_out]) == sorted(titles)  # each view: in, or named
    for title, name, target in left_out:  # the command that prints the view left out
        assert views.get(name).report_title == title and target == str(recording)
    fences = re.findall(r"^(`{3,})(?:text)?$", md, re.M)
    assert len(fences) == 2 * len(folded)  # every fenced block closed, none cut open
    full = report_markdown(llama_report, full=True)
    assert len(full.encode("utf-8")) > PR_COMMENT_BYTES
    assert sorted(re.findall(r"<details><summary>(.+?) \([\d,]+ lines\)</summary>", full)) == sorted(titles)


def overview_row_cells(text: str, first: str) -> list[str]:
    """The non-empty cells of the text overview's row for compile id `first` (2+ spaces apart)."""
    for line in text.splitlines():
        if line.startswith(first + " "):
            return [c for c in re.split(r" {2,}", line.strip()) if c]
    raise AssertionError(f"no overview row for {first}")


def markdown_row_cells(md: str, first: str) -> list[str]:
    row = next(ln for ln in md.splitlines() if ln.startswith(f"| {first} |"))
    cells = [html.unescape(re.sub(r"\\(.)", r"\1", c.strip())) for c in row.strip().strip("|").split("|")]
    return [c for c in cells if c]


def test_every_overview_says_the_same_from_one_source(llama, llama_report):
    """The text, HTML and Markdown overviews print the same cells for each compile; the inference
    graph's ops are torch's own count (`torch.ops.` calls in the logged inference graph)."""
    from tcx.renderers.report_output import fragment_html, render_overview, report_markdown

    _, _, torch_trace = llama
    report = llama_report
    text = piped_text(lambda c: render_overview(report, c))
    page = squeezed(
        html.unescape(re.sub(r"<[^>]+>", "", fragment_html(lambda c: render_overview(report, c))))
    )
    md = report_markdown(report)
    ops: dict[str, int] = {}
    for name, md_, payload in torch_trace_records(torch_trace):
        if name == "aot_inference_graph":
            ops[f"{md_['frame_id']}/{md_['frame_compile_id']}"] = len(re.findall(r"= torch\.ops\.", payload))
    assert ops
    for row in report.pipeline:
        cid = row.compile_id
        cells = overview_row_cells(text, cid)
        assert markdown_row_cells(md, cid) == cells
        assert squeezed("".join(cells)) in page  # the HTML may wrap a row (↪): its cells, in order
        if cid in ops:
            assert f"{ops[cid]} inference" in cells
