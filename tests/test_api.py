"""The Python API (`tcx.record()`, `tcx.load()`, one method per view) and its results in Jupyter.

Recording tests run in a fresh interpreter (a subprocess), as a script or a notebook would, and
compare with torch's own TORCH_TRACE log of the same run (tests/conftest.py's separate parser).
"""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from tests.conftest import PROGRAMS, REPO, TRACE_FIXTURES, read_torch_trace, run_tcx

TRACE_LOG = TRACE_FIXTURES / "tlparse-tests" / "inputs" / "comp_failure.log"
NOTEBOOK = REPO / "fixtures" / "notebooks" / "record_and_explain.ipynb"
HOSTILE = "<img src=x onerror=alert(1)>"
PRINT_BREAK = "Failed to trace builtin operator"  # torch's title for the break `print` causes
COUNTS = ("graph_count", "graph_break_count", "unique_graph_break_count", "compile_count", "recompile_count")


def run_python(code: str, *args: str, env: dict[str, str] | None = None) -> dict:
    """Run `code` in a fresh interpreter (fixtures/programs importable); its last stdout line is JSON."""
    inherited = {k: v for k, v in os.environ.items() if k != "TORCH_TRACE"}
    full_env = {**inherited, "NO_COLOR": "1", "COLUMNS": "120", "PYTHONPATH": str(PROGRAMS), **(env or {})}
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=REPO,
        env=full_env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def sites(doc: dict) -> list[tuple]:
    return sorted((s["type"], s["file"], s["line"], s["occurrences"]) for s in doc["graph_breaks"])


def test_import_tcx_imports_neither_torch_nor_rich():
    code = (
        "import sys, json, tcx\n"
        "tcx.record, tcx.load, tcx.Run\n"
        "print(json.dumps([m for m in ('torch', 'rich', 'click') if m in sys.modules]))"
    )
    assert run_python(code) == []


RECORD_ONE_BLOCK = """
import json, sys
import torch
import tcx
from api_blocks import breaks

model = torch.compile(breaks, backend="eager")
with tcx.record() as run:
    for n in (4, 4, 6, 8):  # a new size recompiles (then dynamic)
        model(torch.randn(n))
run.save(sys.argv[1])
print(json.dumps(run.explain().to_json()))
"""


@pytest.mark.torch
def test_recorded_block_counts_equal_torchs_log_and_the_saved_run_opens_in_the_cli(tmp_path):
    trace_dir = tmp_path / "torch_trace"
    saved = tmp_path / "block.tcx"
    doc = run_python(RECORD_ONE_BLOCK, str(saved), env={"TORCH_TRACE": str(trace_dir)})
    torch_log = read_torch_trace(trace_dir)
    assert doc["source_kind"] == "live"
    assert doc["program"]["status"] == "ok"
    assert doc["graph_count"] == torch_log.graphs > 0
    assert doc["graph_break_count"] == torch_log.graph_breaks > 0
    assert doc["unique_graph_break_count"] == len(torch_log.break_sites)
    assert doc["recompile_count"] == torch_log.recompiles > 0
    assert doc["compile_count"] == len(torch_log.compile_ids)
    assert {s["type"] for s in doc["graph_breaks"]} == {PRINT_BREAK}
    assert {s["file"] for s in doc["graph_breaks"]} == {str(PROGRAMS / "api_blocks.py")}

    cli = run_tcx("explain", str(saved), "--format", "json")
    assert cli.returncode == 0, cli.stderr
    from_cli = json.loads(cli.stdout)
    assert from_cli["source_kind"] == "recording"
    assert {k: from_cli[k] for k in COUNTS} == {k: doc[k] for k in COUNTS}
    assert sites(from_cli) == sites(doc)


RECORD_SEVERAL_BLOCKS = """
import json, sys
import torch
import tcx
from api_blocks import breaks, clean, hostile_named

out = {}
first = torch.compile(breaks, backend="eager")
with tcx.record() as a:
    first(torch.randn(4))
with tcx.record() as b:  # compiled in the block: the per-call capture sees every call
    second = torch.compile(clean, backend="eager")
    second(torch.randn(4))
    second(torch.randn(4))
try:
    with tcx.record() as c:
        torch.compile(breaks, backend="eager")(torch.randn(3))
        raise ValueError("boom")
except ValueError as exc:
    out["raised"] = str(exc)


@tcx.record(captures=())
def decorated(x):
    return torch.compile(breaks, backend="eager")(x)


decorated(torch.randn(2))
with tcx.record(captures=()) as d:
    torch.compile(hostile_named(), backend="eager")(torch.randn(2))

out["a"] = a.explain().to_json()
out["b"] = b.explain().to_json()
out["b_calls"] = b.recompiles().to_json()["calls"]
out["b_guarded"] = sorted({e["function"] for e in b.guards().to_json()["entries"]})
out["c"] = c.explain().to_json()
out["decorated"] = decorated.run.explain().to_json()
out["html"] = d.explain()._repr_html_()
out["text"] = repr(d.explain())
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def several_blocks() -> dict:
    return run_python(RECORD_SEVERAL_BLOCKS)


@pytest.mark.torch
def test_two_recordings_in_one_process_do_not_leak_into_each_other(several_blocks):
    a, b = several_blocks["a"], several_blocks["b"]
    assert a["graph_break_count"] == 1 and {s["function"] for s in a["graph_breaks"]} == {"breaks"}
    assert b["graph_break_count"] == 0 and b["graph_count"] == 1 and b["compile_count"] == 1
    # b's per-call timeline starts at call 0 and holds only its own function's calls
    calls = several_blocks["b_calls"]
    assert [(c["index"], c["function"], c["outcome"]) for c in calls] == [
        (0, "clean", "compile"),
        (1, "clean", "hit"),
    ]
    assert several_blocks["b_guarded"] == ["clean"]


@pytest.mark.torch
def test_an_exception_in_the_block_is_recorded_and_raised_again(several_blocks):
    c = several_blocks["c"]
    assert several_blocks["raised"] == "boom"
    assert c["program"]["status"] == "exception"
    assert c["program"]["exc_type"] == "ValueError" and c["program"]["message"] == "boom"
    assert c["graph_break_count"] == 1  # what compiled before the exception is kept


@pytest.mark.torch
def test_a_decorated_function_is_recorded_without_tcxs_own_frames(several_blocks):
    doc = several_blocks["decorated"]
    assert doc["graph_break_count"] == 1
    files = {f["file"] for s in doc["graph_breaks"] for f in s["user_stack"]}
    assert str(PROGRAMS / "api_blocks.py") in files
    assert not any("/recorder/" in f or f.endswith("api.py") for f in files), files


class _Checker(HTMLParser):
    """Every tag closed in order, the tags a view uses only, no event handler, no script."""

    ALLOWED = frozenset({"div", "pre", "span", "details", "summary", "p", "a"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.open: list[str] = []
        self.problems: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in self.ALLOWED:
            self.problems.append(f"tag <{tag}>")
        self.problems += [f"attribute {k} on <{tag}>" for k, _ in attrs if k.startswith("on") or k == "src"]
        self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open.pop() != tag:
            self.problems.append(f"</{tag}> does not close the open tag")

    def handle_data(self, data: str) -> None:
        self.text.append(data)


@pytest.mark.torch
def test_repr_html_is_valid_escaped_html_with_the_breaks_title(several_blocks):
    page = several_blocks["html"]
    checker = _Checker()
    checker.feed(page)
    checker.close()
    assert checker.problems == [] and checker.open == []
    text = "".join(checker.text)
    assert PRINT_BREAK in text
    assert HOSTILE in text  # the hostile name is shown, as text
    assert html.escape(HOSTILE, quote=False) in page and HOSTILE not in page
    # Self-contained: nothing fetched (a link torch printed in a hint is text, not a fetch).
    assert "<script" not in page and not re.search(r"""(?:src|href)\s*=\s*["']?https?:""", page)
    plain = several_blocks["text"]
    assert PRINT_BREAK in plain and HOSTILE in plain and "\x1b[" not in plain


def test_load_reads_a_torch_trace_log_as_the_cli_does():
    import tcx

    run = tcx.load(TRACE_LOG)
    doc = run.explain().to_json()
    cli = run_tcx("explain", str(TRACE_LOG), "--format", "json")
    assert {k: doc[k] for k in COUNTS} == {k: json.loads(cli.stdout)[k] for k in COUNTS}
    assert run.explain().graph_break_count == doc["graph_break_count"]
    assert doc["source_kind"] == "trace_log"


def test_view_methods_come_from_the_registry_and_check_their_arguments():
    import inspect

    import tcx
    from tcx.core.views.registry import VIEWS

    run = tcx.load(TRACE_LOG)
    for view in VIEWS:
        assert callable(getattr(run, view.name)), view.name
    assert "full" in inspect.signature(run.guards).parameters
    with pytest.raises(TypeError, match="unexpected keyword"):
        run.guards(ful=True)
    with pytest.raises(tcx.UsageError, match="matches no compile"):
        run.explain(compile="999/9")
    with pytest.raises(tcx.UsageError, match="no such file"):
        tcx.load(REPO / "missing.tcx")
    with pytest.raises(tcx.UsageError, match="not a recording or a log"):
        tcx.load(PROGRAMS / "demo.py")


@pytest.mark.torch
def test_a_notebook_cell_records_and_the_next_renders_the_breaks(tmp_path, monkeypatch):
    import nbformat  # the dev extra installs nbclient (with nbformat) and ipykernel
    from nbclient import NotebookClient

    kernels = tmp_path / "jupyter" / "kernels" / "tcx-test"
    kernels.mkdir(parents=True)
    spec = {
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "tcx test venv",
        "language": "python",
    }
    (kernels / "kernel.json").write_text(json.dumps(spec))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.delenv("TORCH_TRACE", raising=False)
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(
        nb, kernel_name="tcx-test", timeout=300, resources={"metadata": {"path": str(tmp_path)}}
    ).execute()

    shown = [o for o in nb.cells[2].outputs if o.output_type == "execute_result"]
    assert shown, nb.cells[2].outputs
    page = shown[0]["data"]["text/html"]
    checker = _Checker()
    checker.feed(page)
    text = "".join(checker.text)
    assert 'class="tcx-view"' in page and PRINT_BREAK in text
    # the cell's own code is quoted: the recording snapshots the cell (it has no file on disk)
    assert 'print("side effect")  # a graph break, in this cell' in text
    printed = "".join(o.get("text", "") for o in nb.cells[3].outputs if o.output_type == "stream")
    assert printed.strip() == "1"

    cli = run_tcx("explain", str(tmp_path / "notebook_run.tcx"), "--format", "json")
    assert cli.returncode == 0, cli.stderr
    doc = json.loads(cli.stdout)
    assert doc["graph_break_count"] == 1 and doc["graph_breaks"][0]["type"] == PRINT_BREAK
    text = run_tcx("explain", str(tmp_path / "notebook_run.tcx"))
    assert 'print("side effect")  # a graph break, in this cell' in text.stdout
