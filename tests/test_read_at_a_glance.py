"""Read at a glance (issue 39): the overview first, guards that read, an HTML report that is a page.

The real-model fixtures are recorded once per session (tests/conftest.py): nanoGPT's train/eval loop
through Inductor (`recorded("nano_train_eval")`: the report and its HTML page need Inductor's output),
and HF Llama under the eager backend (`dynamo_recorded`: its guards and breaks need no Inductor).
Every other output is rendered from those recordings, as a user re-renders a saved run.
"""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess

import pytest
from conftest import REPO, run_tcx

OVERVIEW_MAX_LINES = 400  # a screen or two for a 2-layer model


@pytest.fixture(scope="module")
def nano(recorded) -> str:
    return str(recorded("nano_train_eval").recording)


@pytest.fixture(scope="module")
def llama(dynamo_recorded) -> str:
    return str(dynamo_recorded("models/tiny_llama.py").recording)


def _ok(*args: str) -> str:
    proc = run_tcx(*args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


@pytest.mark.torch
def test_report_prints_the_overview_and_full_prints_every_view(nano):
    overview = _ok("report", nano)
    full = _ok("report", nano, "--full")
    lines = overview.splitlines()
    assert len(lines) <= OVERVIEW_MAX_LINES, len(lines)
    assert len(full.splitlines()) > 5 * len(lines)  # every view whole
    assert "Top problems, worst first:" in overview or "No problems found" in overview
    # one row per compile, and each section with the command that prints it (on the recording: instant)
    assert re.search(r"^0/0 +forward ", overview, re.M) and re.search(r"^0/1 +forward ", overview, re.M)
    for view in ("explain", "recompiles", "guards", "trace", "bytecode", "graphs", "fusion", "codegen"):
        assert f"tcx {view} {nano}" in overview, view
    assert f"tcx report {nano} --full" in overview
    # the sections only come with --full; a section with nothing to show never does
    assert "Dynamo's trace ─" not in overview and "Dynamo's trace ─" in full
    assert "Export" not in full and "No torch.export call" not in full
    # one compile total, saying what it covers: the per-compile column's sum
    total_re = r"compile time ([\d.]+) s over 2 compile\(s\) \(the 'compile s' column's sum"
    [total] = re.findall(total_re, " ".join(overview.split()))
    column = [float(m) for m in re.findall(r"^0/\d +forward .* ([\d.]+)$", overview, re.M)]
    assert len(column) == 2 and abs(sum(column) - float(total)) < 0.02
    assert "cumulative per phase" not in full


@pytest.mark.torch
def test_explain_with_no_breaks_names_the_recompiles(nano):
    text = _ok("explain", nano)
    doc = run_tcx("explain", nano, "--format", "json")
    counts = json.loads(doc.stdout)
    assert counts["graph_break_count"] == 0 and counts["recompile_count"] == 1
    assert "No graph breaks" in text
    flat = " ".join(text.split())
    assert f"1 recompile of forward: which guard failed on which call: tcx recompiles {nano}" in flat


@pytest.mark.torch
def test_explain_opens_with_the_findings_and_folds_restarts_after(llama):
    text = _ok("explain", llama)
    lines = text.splitlines()
    findings = next(i for i, ln in enumerate(lines) if "distinct graph break" in ln)
    first_site = next(i for i, ln in enumerate(lines) if ln.startswith("#1 "))
    restarts = [i for i, ln in enumerate(lines) if ln.startswith("restarted ")]
    assert restarts and findings < first_site < restarts[0]  # findings, the breaks, then restarts
    assert re.search(r"^\d+ restarts? \(attempts torch threw away", text, re.M)
    # a reason already given is named by the restart that gave it: mostly one line each
    assert any(re.search(r": as \d+/\d+$", lines[i]) for i in restarts)


GUARD_ROW = re.compile(r"^    ([A-Z][A-Z_]+) ", re.M)


@pytest.mark.torch
def test_guards_read_dotted_with_torch_internal_guards_folded_and_counted(nano):
    doc = json.loads(_ok("guards", nano, "--format", "json"))
    entry = doc["entries"][0]
    assert entry["guard_count"] == entry["torch_guard_count"] > 100
    raw = [g for g in entry["guards"] if "._modules['" in g["source"]]
    assert raw  # torch's text in the JSON, as torch wrote it
    text = _ok("guards", nano, "--compile", entry["compile_id"])
    assert "._modules['" not in text and "._parameters['" not in text
    assert (
        re.search(r"TENSOR_MATCH +self\.wte\.weight ", text)
        and "TYPE_MATCH               self.blocks.0.fc " in text
    )
    assert f"  {entry['guard_count']} guards · " in text  # one count
    [folded] = re.findall(r"^  \+ (\d+) torch-internal guards \((.*)\)$", text, re.M)
    assert "hook dicts are empty ×" in folded[1] and "--all-text lists each" in folded[1]
    # every guard is a row or counted in the folded line, and --all-text lists each as torch wrote it
    assert len(GUARD_ROW.findall(text)) + int(folded[0]) == entry["guard_count"]
    whole = _ok("guards", nano, "--compile", entry["compile_id"], "--all-text")
    assert len(GUARD_ROW.findall(whole)) == entry["guard_count"] and "torch-internal" not in whole
    assert "EMPTY_NN_MODULE_HOOKS_DICT" in whole and "._modules['" in whole


@pytest.mark.torch
def test_a_recompiled_entry_shows_what_differs_then_counts_the_rest(nano):
    text = _ok("recompiles", nano)
    assert "._modules['" not in text
    assert re.search(r"differs from \[0/0\]: grad_mode: (true|false) → (true|false)\n", text)
    [same] = re.findall(r"and (\d+) guard lines as in \[0/0\] \(--all shows every line\)", text)
    doc = json.loads(_ok("recompiles", nano, "--format", "json"))
    first, second = doc["entries"]["forward"]
    assert int(same) == len(second["guards"]) == len(first["guards"])


def test_a_log_s_guard_count_says_which_count_it_is():
    """torch counts guards (compilation_metrics); a log's guard tree lists more leaves for them."""
    log = str(REPO / "tests" / "data" / "traces" / "torch2.13_eager_demo.log.gz")
    text = _ok("guards", log, "--compile", "0/0")
    assert "10 guards (torch's count); the log's guard tree checks them in 23 leaves, listed below" in text
    assert "torch counted" not in text
    assert "+ 15 torch-internal guards (a tensor is not marked dynamic" in text


CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
)


@pytest.mark.torch
def test_the_html_report_is_a_page_of_tables_folds_and_links(nano, tmp_path_factory):
    """The page of nanoGPT's Inductor run: tables and <details>, not terminal text; every internal
    link lands; nothing fetched. Its screenshot stays in pytest's temporary folder (html-report0)."""
    folder = tmp_path_factory.mktemp("html-report")
    page = folder / "nano.html"
    _ok("report", nano, "--format", "html", "-o", str(page))
    source = page.read_text(encoding="utf-8")
    assert "↪" not in source
    assert source.count("<table") >= 4 and source.count("<details") >= 10
    ids = set(re.findall(r'\bid="([^"]+)"', source))
    hrefs = set(re.findall(r'\bhref="#([^"]*)"', source))
    assert hrefs and hrefs <= ids, sorted(hrefs - ids)
    # each compile's row links to its graph and its kernels, which are on the page
    for cid in ("0-0", "0-1"):
        assert {f"compile-{cid}", f"graph-{cid}", f"kernels-{cid}"} <= ids and f"graph-{cid}" in hrefs
    assert not re.search(r"""\b(?:src|href)\s*=\s*(?!["']?#)""", source)  # no file or URL fetched
    assert "<script" not in source.lower()
    browser = shutil.which("chromium")
    if browser is None:
        return  # the page's structure is checked above; test_report.py drives the browser in CI
    flags = [*CHROMIUM_FLAGS, f"--user-data-dir={folder / 'profile'}"]
    dom = subprocess.run(
        [browser, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert "Top problems, worst first" in dom.stdout and dom.stdout.count("<details") >= 10
    shot = folder / "nano.png"
    subprocess.run(
        [browser, *flags, "--window-size=1400,1000", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=120,
    )
    assert shot.exists() and shot.stat().st_size > 10_000


@pytest.mark.torch
def test_the_html_report_of_breaks_links_each_region_to_its_compile(llama, tmp_path):
    page = tmp_path / "llama.html"
    _ok("report", llama, "--format", "html", "-o", str(page))
    source = page.read_text(encoding="utf-8")
    ids = set(re.findall(r'\bid="([^"]+)"', source))
    hrefs = re.findall(r'\bhref="#([^"]*)"', source)
    assert set(hrefs) <= ids and "↪" not in source
    doc = json.loads(_ok("explain", llama, "--format", "json"))
    assert doc["graph_breaks"] and all(f"break-{i}" in ids for i in range(1, len(doc["graph_breaks"]) + 1))
    first = source[source.index('id="break-1"') :]
    first = first[: first.index("</details>")]
    assert 'href="#compile-' in first  # the region it ends, linked
    assert "&lt;module&gt;" in source and "<module>" not in source  # text from the run is escaped


def test_cost_rows_wrap_instead_of_cutting_a_kernel_name():
    """A breakdown row wider than the console wraps under its `what` column; the name is whole."""
    from test_cost_gpu import launch_bound_step, step_cost

    from tcx.renderers.code_block import CONTINUATION
    from tcx.renderers.console import make_console
    from tcx.renderers.cost_terminal import render_rows

    long_name = "triton_per_fused__log_softmax__unsafe_view_add_arange_native_layer_norm_backward_0"
    profile = launch_bound_step()
    profile["names"] = [long_name if n == "triton_poi_fused_add_0" else n for n in profile["names"]]
    buffer = io.StringIO()
    render_rows(step_cost(profile), make_console(buffer, color=False, width=100))
    text = buffer.getvalue()
    assert "…" not in text
    joined = re.sub(r"\n +" + re.escape(CONTINUATION), "", text)
    assert long_name in joined


@pytest.mark.torch
def test_a_decorator_frame_is_named_by_the_method_it_wraps(llama):
    """transformers' @deprecate_kwarg makes Dynamo compile `wrapped_func`; its guards name what it wraps."""
    doc = json.loads(_ok("explain", llama, "--format", "json"))
    names = doc["frame_names"]
    wrapped = [cid for cid, name in names.items() if name.endswith("(via wrapped_func)")]
    assert wrapped
    guards = json.loads(_ok("guards", llama, "--format", "json"))
    for cid in wrapped:
        [entry] = [e for e in guards["entries"] if e["compile_id"] == cid]
        texts = {g["source"]: " ".join(g["text"]) for g in entry["guards"]}
        owner = re.search(r"type=<class '[\w.]+\.(\w+)'>", texts["L['args'][0]"]).group(1)
        method = re.search(r"== '(\w+)'", texts["L['func'].__name__"]).group(1)
        assert names[cid] == f"{owner}.{method} (via wrapped_func)"
    text = " ".join(_ok("explain", llama).split())
    assert "LlamaForCausalLM.forward (via wrapped_func)" in text
