"""Bad input at the command line: a documented exit code and one clear paragraph, never a traceback.

Every case here fails before any program would run, so nothing imports torch (that is checked
too). Subprocess tests that run torch live in the torch-marked test files.
"""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import PROGRAMS, REPO, TRACE_FIXTURES, run_tcx

from tcx.core.errors import EXIT_INPUT, EXIT_OK, EXIT_USAGE
from tcx.core.ingest.recording import FORMAT_NAME, RecordingWriter, write_header

SIMPLE_LOG = TRACE_FIXTURES / "tlparse-tests" / "inputs" / "simple.log"


def assert_clean_failure(proc: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    assert "internal error" not in proc.stderr
    for needle in needles:
        assert needle in proc.stderr, (needle, proc.stderr)


# --- usage errors (2) -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--bogus"], "No such option '--bogus'"),
        (["explain", "--bogus", "x.py"], "No such option '--bogus'"),
        (["frobnicate"], "No such command 'frobnicate'"),
        (["explain"], "Missing argument 'TARGET'"),
        (["explain", "x.py", "--format", "xml"], "Invalid value for '--format'"),
        (["check", "x.py", "--max-graph-breaks", "many"], "'many' is not a valid integer"),
        (["explain", "x.py", "--timeout", "soon"], "'soon' is not a valid float"),
    ],
)
def test_bad_command_lines(args, needle):
    assert_clean_failure(run_tcx(*args), EXIT_USAGE, needle)


def test_missing_program(tmp_path):
    missing = tmp_path / "missing.py"
    assert_clean_failure(run_tcx("explain", str(missing)), EXIT_USAGE, f"no such file: {str(missing)!r}")
    assert_clean_failure(run_tcx("explain", f"{missing}:f"), EXIT_USAGE, "no such file")


@pytest.mark.parametrize("name", ["missing.tcx", "missing.log", "nothere", "dir/run.tcx.gz"])
def test_show_missing_file(tmp_path, name):
    assert_clean_failure(run_tcx("show", str(tmp_path / name)), EXIT_USAGE, "no such file")


def test_check_without_budget():
    proc = run_tcx("check", str(PROGRAMS / "print_break.py"))
    assert_clean_failure(proc, EXIT_USAGE, "needs at least one budget", "--max-graph-breaks")
    assert proc.stdout == ""


def test_check_negative_budget():
    proc = run_tcx("check", str(PROGRAMS / "print_break.py"), "--max-recompiles", "-1")
    assert_clean_failure(proc, EXIT_USAGE, "--max-recompiles must be 0 or more")


def test_bad_call_spec_names_the_item():
    proc = run_tcx("explain", f"{PROGRAMS / 'seed_f.py'}:f", "--call", "128x32,32xq")
    assert_clean_failure(proc, EXIT_USAGE, "'32xq' is not a shape")


def test_show_on_a_program():
    proc = run_tcx("show", str(PROGRAMS / "print_break.py"))
    assert_clean_failure(proc, EXIT_USAGE, "is a program", "tcx explain")
    proc = run_tcx("show", "some.module:func")
    assert_clean_failure(proc, EXIT_USAGE, "is a program")


# --- unreadable recordings and logs (4) -----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "content", "needle"),
    [
        ("notes.txt", b"just some notes\nnothing to see\n", "not a tcx recording or a TORCH_TRACE log"),
        ("empty.log", b"", "no trace events"),
        ("noise.bin", bytes(range(256)) * 32, "not a tcx recording or a TORCH_TRACE log"),
        ("fake.tcx", b"hello\n", "does not look like a tcx recording"),
        ("garbage.tcx.gz", b"\x1f\x8b" + bytes(range(64)), "cannot read"),
        ("garbage.gz", b"\x1f\x8b" + bytes(range(64)), "cannot read"),
        (
            "future.tcx",
            json.dumps({"kind": "header", "format": FORMAT_NAME, "version": 999}).encode() + b"\n",
            "newer tcx",
        ),
    ],
)
def test_show_unreadable_files(tmp_path, name, content, needle):
    path = tmp_path / name
    path.write_bytes(content)
    proc = run_tcx("show", str(path))
    assert_clean_failure(proc, EXIT_INPUT, "tcx: error:", needle)
    assert proc.stdout == ""
    # the same for every view that takes a file
    assert_clean_failure(run_tcx("check", str(path), "--max-graph-breaks", "0"), EXIT_INPUT, needle)


def test_show_empty_directory(tmp_path):
    assert_clean_failure(run_tcx("show", str(tmp_path)), EXIT_INPUT, "empty directory")


def test_show_recording_with_damaged_lines_warns_and_renders(tmp_path):
    path = tmp_path / "damaged.tcx"
    write_header(path, target="prog.py")
    writer = RecordingWriter(path)
    writer.write("program_exit", status="ok", exit_code=0)
    writer.close()
    with path.open("a") as fh:
        fh.write('{"kind": "log", "mess')  # cut off mid-line
    proc = run_tcx("show", str(path))
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "damaged.tcx:3: not a JSON event (truncated last line" in proc.stdout
    assert "Nothing was compiled" in proc.stdout and "No graph breaks" not in proc.stdout
    doc = json.loads(run_tcx("show", str(path), "--format", "json").stdout)
    assert doc["problems"] == ["damaged.tcx:3: not a JSON event (truncated last line: the run was cut off)"]


def test_show_gzipped_trace_log(tmp_path):
    gz = tmp_path / "trace.log.gz"
    gz.write_bytes(gzip.compress(SIMPLE_LOG.read_bytes()))
    proc = run_tcx("show", str(gz), "--format", "json")
    assert proc.returncode == EXIT_OK, proc.stderr
    assert json.loads(proc.stdout)["graph_count"] == 1


# --- help, version, and no torch ------------------------------------------------------------------


def test_help_and_version():
    proc = run_tcx("--help")
    assert proc.returncode == EXIT_OK and proc.stderr == ""
    assert "Exit codes: 0 ok" in proc.stdout and "4 unreadable recording or log" in proc.stdout
    for view in ("explain", "check", "show"):
        assert view in proc.stdout
        sub = run_tcx(view, "--help")
        assert sub.returncode == EXIT_OK and "--format" in sub.stdout, sub.stderr
    version = run_tcx("--version")
    assert version.returncode == EXIT_OK and "tcx, version" in version.stdout


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)


def test_importing_the_cli_imports_neither_torch_nor_rich():
    proc = _python(
        "import sys, tcx.cli.main\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
        "assert 'rich' not in sys.modules, 'rich imported'\n"
    )
    assert proc.returncode == 0, proc.stderr


# What `tcx --help` and `tcx completion` may load: the click commands and the registry's option
# declarations. The run model, the readers, the views, renderers, the TUI, torch and rich wait for
# a command that needs them (README: `tcx --help` under 0.15 s).
HELP_NEVER_IMPORTS = ("tcx.core.model", "tcx.core.ingest", "tcx.renderers", "tcx.tui", "torch", "rich")
HELP_MODULES_AT_MOST = 26  # 22 today; a few more are fine, the model's ~40 are not


def imported_modules(*args: str) -> list[str]:
    """The modules `python -m tcx ARGS` imports, as its own `-X importtime` report lists them."""
    argv = [sys.executable, "-X", "importtime", "-m", "tcx", *args]
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_OK, proc.stderr[-2000:]
    lines = proc.stderr.splitlines()
    rows = [line.split("|")[-1].strip() for line in lines if line.startswith("import time:")]
    return [name for name in rows[1:] if name]  # the first row is the header


@pytest.mark.parametrize("args", [("--help",), ("completion", "bash"), ("check", "--help")])
def test_help_and_completion_import_neither_the_model_nor_torch(args):
    names = imported_modules(*args)
    assert "tcx.cli.main" in names  # the report is read: the CLI itself is listed
    assert [n for n in names if n.startswith(HELP_NEVER_IMPORTS)] == []
    views = [n for n in names if n.startswith("tcx.core.views.")]
    assert views == ["tcx.core.views.registry"]
    ours = [n for n in names if n == "tcx" or n.startswith("tcx.")]
    assert len(ours) <= HELP_MODULES_AT_MOST, ours


def test_views_on_files_and_renderers_never_import_torch(tmp_path):
    gz = tmp_path / "trace.log.gz"
    gz.write_bytes(gzip.compress(SIMPLE_LOG.read_bytes()))
    code = f"""
import sys
import tcx.core.model, tcx.core.run.callspec, tcx.core.views.check, tcx.core.views.explain
import tcx.core.ingest.recording
import tcx.core.run.targets, tcx.core.ingest.trace_log, tcx.cli.session
import tcx.renderers.check_output, tcx.renderers.console, tcx.renderers.explain_terminal
from tcx.cli.main import main
for argv in (["show", {str(SIMPLE_LOG)!r}], ["check", {str(gz)!r}, "--max-graphs", "0", "--format", "sarif"],
             ["explain", {str(SIMPLE_LOG)!r}, "--format", "json"]):
    try:
        main(argv)
    except SystemExit as exc:
        print("exit", exc.code, file=sys.stderr)
assert 'torch' not in sys.modules, 'torch imported'
"""
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == ["exit 0", "exit 1", "exit 0"]


def test_the_tests_of_this_suite_that_must_not_need_torch_do_not_import_it():
    files = ["test_graph_break_text", "test_trace_log", "test_recording_format", "test_callspec_targets",
             "test_renderers", "test_cli_errors"]  # fmt: skip
    code = (
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
        f"for name in {files!r}:\n"
        "    __import__(name)\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    proc = _python(code)
    assert proc.returncode == 0, proc.stderr
