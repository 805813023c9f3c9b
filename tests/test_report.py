"""`tcx report`: every view in one document — terminal, one self-contained HTML file, Markdown."""

from __future__ import annotations

import re
import subprocess

import pytest
from conftest import TRACE_FIXTURES, run_tcx, tool
from test_renderers import program_events, save_recording

from tcx.core.views.registry import VIEWS

SECTIONS = ("overview", *(v.name for v in VIEWS if v.report_title))
TITLES = tuple(str(v.report_title) for v in VIEWS if v.report_title)


@pytest.fixture(scope="module")
def llama(recorded, tmp_path_factory):
    """One real run of a transformers causal LM (small random config) through the whole pipeline."""
    run = recorded("tiny_llama")
    return run.recording, run.report, tmp_path_factory.mktemp("llama")


@pytest.mark.torch
def test_report_json_composes_every_view(llama):
    _, doc, _ = llama
    assert doc["schema"] == "tcx.report/1"
    views = doc["views"]
    assert set(views) == set(SECTIONS) - {"overview"}
    assert all(not v.get("unavailable") for v in views.values()), {
        k: v.get("unavailable") for k, v in views.items()
    }
    assert len(doc["pipeline"]) == views["explain"]["compile_count"]
    kernels = sum(row["inductor"]["kernels"] for row in doc["pipeline"])
    assert kernels == views["codegen"]["kernel_count"] > 0
    ranks = [p["rank"] for p in doc["problems"]]
    assert ranks == sorted(ranks) and doc["problems"][0]["rank"] == 0  # frames Dynamo gave up on come first
    assert doc["compile_time_s"]["total"] > 0


@pytest.mark.torch
def test_report_terminal_and_markdown(llama):
    save, _, _ = llama
    text = run_tcx("report", str(save)).stdout
    for title in ("Overview", *TITLES):  # the overview names each section (none for Export: no export ran)
        assert (title in text) == (title != "Export"), title
    assert "Top problems, worst first" in text
    md = run_tcx("report", str(save), "--format", "markdown", "--full").stdout
    assert md.startswith("## tcx report:")
    # --full: every view but Export (this program never exports: an empty section is left out)
    assert md.count("<details>") == md.count("</details>") == len(SECTIONS) - 2
    assert "Export" not in text
    fences = re.findall(r"^(`{3,})(?:text)?$", md, re.M)
    assert len(fences) % 2 == 0 and fences  # every fenced block is closed
    assert "| compile | frame |" in md


@pytest.mark.torch
def test_report_html_renders_in_a_headless_browser(llama):
    save, _, folder = llama
    page = folder / "report.html"
    proc = run_tcx("report", str(save), "--format", "html", "-o", str(page))
    assert proc.returncode == 0, proc.stderr
    source = page.read_text()
    assert "<script" not in source.lower()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", source)  # nothing fetched from a network
    for anchor in SECTIONS:
        assert (f'id="{anchor}"' in source) == (anchor != "export")  # this program never exports
    browser = tool("chromium", "a headless browser: Debian's chromium")
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={folder / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
    ]
    dom = subprocess.run(
        [browser, *flags, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert "Top problems, worst first" in dom.stdout and "Generated code" in dom.stdout
    console_errors = [line for line in dom.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line]
    assert console_errors == []
    shot = folder / "report.png"
    subprocess.run(
        [browser, *flags, "--window-size=1280,900", f"--screenshot={shot}", page.as_uri()],
        capture_output=True,
        timeout=120,
    )
    assert shot.exists() and shot.stat().st_size > 10_000


def test_html_escapes_everything_from_the_program(tmp_path):
    hostile = "<script>alert(1)</script> & <img src=x onerror=alert(2)>"
    program = tmp_path / "prog.py"
    program.write_text("x = 1\n" * 20)
    rec = save_recording(
        tmp_path / "run.tcx", program_events(str(program), explanation=hostile), str(program)
    )
    page = run_tcx("report", str(rec), "--format", "html").stdout
    assert "<script>" not in page and "<img" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    md = run_tcx("report", str(rec), "--format", "markdown").stdout
    assert "Data-dependent branching" in md


def test_a_view_that_breaks_says_so_in_its_section_and_the_report_goes_on(monkeypatch):
    """Views parse payloads as they print; a payload that breaks a parser sinks that one section."""
    from tcx.core.ingest.trace_log import load_trace
    from tcx.core.model import build_model, guard_sets
    from tcx.core.views import codegen as codegen_view
    from tcx.core.views.report import build_report
    from tcx.renderers.report_output import report_html

    def broken(*_args: object) -> None:
        raise ValueError("a tree torch never wrote")

    log = TRACE_FIXTURES / "tlparse-tests" / "inputs" / "simple.log"
    whole = build_report(build_model(load_trace(log), "trace"))
    assert sum(row.kernels for row in whole.pipeline) > 0 and not whole.failures
    monkeypatch.setattr(guard_sets, "parse_guard_tree", broken)  # parsed when the section prints
    monkeypatch.setattr(codegen_view, "parse_wrapper", broken)  # parsed for the overview's counts
    rep = build_report(build_model(load_trace(log), "trace"))
    assert rep.views["codegen"] is None and sum(row.kernels for row in rep.pipeline) == 0
    page = "".join(report_html(rep))
    assert "guards view could not be rendered: ValueError: a tree torch never wrote" in page
    assert "codegen view could not be built: ValueError: a tree torch never wrote" in page
    shown = ["overview", *(g.name for g in rep.guide if not g.empty)]  # a log that never exports: no Export
    assert "export" not in shown and len(shown) == len(SECTIONS) - 1
    assert page.count("<section") == len(shown) and "graph break" in page.lower()
    assert set(rep.failures) == {"guards", "codegen"}
    assert rep.docs["codegen"] == {"unavailable": rep.failures["codegen"]}
