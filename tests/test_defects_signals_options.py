"""Issue 12, items 8 and 10 and the minor list: signals, processes, options, special files.

Signal tests send real SIGTERM/SIGINT to a real `python -m tcx` process running a real program
(fixtures/programs/broken/hangs_with_children.py), then check by pid that nothing it started
is left, that `--save` was honoured, the exit code and the message.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from conftest import PROGRAMS, REPO, run_tcx

from tcx.core.errors import EXIT_INPUT, EXIT_OK, EXIT_TARGET, EXIT_USAGE
from tcx.core.ingest.recording import FORMAT_NAME

SIMPLE_LOG = REPO / "fixtures" / "torch-trace" / "tlparse-tests" / "inputs" / "simple.log"
HANGS = PROGRAMS / "broken" / "hangs_with_children.py"


def assert_clean_failure(proc: subprocess.CompletedProcess, code: int, *needles: str) -> None:
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    for needle in needles:
        assert needle in proc.stderr, (needle, proc.stderr)


# --- signals and processes (item 8) -------------------------------------------------------------


class Tcx:
    """`python -m tcx ARGS` in the background; its stderr is read as it comes (the program's
    `pids ...` line arrives there with --show-output, or through `tcx record`)."""

    def __init__(self, *args: str, tmp: Path) -> None:
        self.tmpdir = tmp / "tmpdir"
        self.tmpdir.mkdir()
        env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", "TMPDIR": str(self.tmpdir)}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tcx", *args],
            cwd=REPO,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            # as in a shell: SIGINT is not ignored (a pytest-xdist worker may ignore it)
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
        )
        self.stderr: list[str] = []
        self.pids: list[int] = []
        self._started = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr.append(line)
            if line.startswith("pids "):
                self.pids = [int(p) for p in line.split()[1:]]
                self._started.set()
        self._started.set()

    def wait_for_program(self) -> list[int]:
        assert self._started.wait(120), "the program never started"
        assert self.pids, "".join(self.stderr)
        return self.pids

    def finish(self) -> tuple[int, str, str]:
        assert self.proc.stdout is not None
        out = self.proc.stdout.read()
        code = self.proc.wait(timeout=60)
        self._reader.join(10)
        return code, out, "".join(self.stderr)

    def leftover_temp_dirs(self) -> list[str]:
        return [p.name for p in self.tmpdir.iterdir() if p.name.startswith(("tcx-run-", "tcx-trace-"))]


def _alive(pid: int) -> bool:
    """Running (a zombie waiting for an init that never reaps it counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def assert_all_gone(pids: list[int]) -> None:
    deadline = time.monotonic() + 10
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = [p for p in pids if _alive(p)]
    for pid in left:  # do not leave them running after the test
        os.kill(pid, signal.SIGKILL)
    assert not left, f"still running: {left}"


@pytest.mark.torch
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_signal_stops_every_process_and_keeps_the_recording(tmp_path, sig, code):
    save = tmp_path / "run.tcx"
    tcx = Tcx("explain", str(HANGS), "--save", str(save), "--show-output", tmp=tmp_path)
    pids = tcx.wait_for_program()  # the program, its background process, its own-session "rank"
    assert len(pids) == 3
    tcx.proc.send_signal(sig)
    rc, out, err = tcx.finish()
    assert_all_gone(pids)
    name = sig.name
    assert rc == code, (rc, out, err)
    assert tcx.leftover_temp_dirs() == []
    # the program's own sleepers print their KeyboardInterrupt (--show-output); tcx prints none
    assert "internal error" not in err and f'File "{REPO}' not in err
    assert f"{name} received: stopping the program" in err
    assert f"The program did not finish: tcx received {name} and stopped it" in " ".join(out.split())
    assert "SIGKILL" not in out and "crash in native code" not in out
    assert "graph_break()" in out  # the partial report: the break recorded before the signal
    assert f"recording saved to {save}" in err
    shown = run_tcx("show", str(save), "--format", "json")
    assert shown.returncode == EXIT_TARGET, shown.stderr  # a failed run: as `tcx explain FILE`
    doc = json.loads(shown.stdout)
    assert doc["program"]["status"] == "interrupted"
    assert doc["program"]["interrupted_by"] == name
    assert doc["graph_break_count"] == 1


@pytest.mark.torch
def test_background_processes_do_not_outlive_a_normal_exit(tmp_path):
    tcx = Tcx("explain", str(HANGS), "--show-output", "--", "exit", tmp=tmp_path)
    pids = tcx.wait_for_program()
    rc, out, err = tcx.finish()
    assert_all_gone(pids)
    assert rc == EXIT_OK, (out, err)


@pytest.mark.torch
def test_tcx_record_interrupted_keeps_the_logs(tmp_path):
    logs = tmp_path / "logs"
    tcx = Tcx("record", "--save", str(logs), "--", sys.executable, str(HANGS), tmp=tmp_path)
    pids = tcx.wait_for_program()
    tcx.proc.send_signal(signal.SIGINT)
    rc, out, err = tcx.finish()
    assert_all_gone(pids)
    assert rc == 130, (out, err)
    assert tcx.leftover_temp_dirs() == []
    assert "interrupted (SIGINT): tcx stopped the command" in err
    assert out.startswith("tcx record "), out[:200]  # the header names the command that ran
    assert "graph_break()" in out
    assert list(logs.iterdir()), "--save kept nothing"
    shown = run_tcx("show", str(logs), "--format", "json")
    assert shown.returncode == EXIT_OK, shown.stderr
    assert json.loads(shown.stdout)["graph_break_count"] == 1


@pytest.mark.torch
def test_program_output_tail_is_bounded(tmp_path):
    """The tail ends where the program did: what prints while Python shuts the recorder child down (an
    atexit handler here; a leak report from an extension tcx loaded, in a run seen in the suite) is
    counted in a marker line, not shown as the program's last line."""
    script = tmp_path / "loud.py"
    script.write_text(
        'import atexit, sys\natexit.register(lambda: print("at exit " * 3))\n'
        'print("x" * 5_000_000)\nprint("last line")\nsys.exit(3)\n'
    )
    save = tmp_path / "loud.tcx"
    proc = run_tcx("explain", str(script), "--save", str(save), "--format", "json")
    assert proc.returncode == EXIT_TARGET, proc.stderr
    tail = json.loads(proc.stdout)["program"]["output_tail"]
    assert tail[-1] == "last line"
    assert "earlier bytes of output cut" in tail[0]
    # 25 bytes from the atexit handler, and more where triton's leak report came too
    shutdown = re.fullmatch(
        r"\[… ([\d,]+) bytes printed after the program ended, while Python shut down, not shown\]", tail[1]
    )
    assert shutdown and int(shutdown[1].replace(",", "")) >= 25, tail[1]
    assert any(line.endswith("more characters cut]") for line in tail)
    assert sum(map(len, tail)) < 5_000
    assert save.stat().st_size < 200_000


# --- options (item 10) --------------------------------------------------------------------------


def test_save_to_an_unwritable_path_is_refused_before_running():
    proc = run_tcx("explain", str(PROGRAMS / "broken" / "hangs.py"), "--save", "/proc/x.tcx", timeout=60)
    assert_clean_failure(proc, EXIT_USAGE, "--save '/proc/x.tcx' cannot be written", "nothing was run")


def test_save_onto_the_target_script_is_refused(tmp_path):
    script = tmp_path / "prog.py"
    script.write_text("print('hi')\n")
    proc = run_tcx("explain", str(script), "--save", str(script))
    assert_clean_failure(proc, EXIT_USAGE, "is the program being run")
    assert script.read_text() == "print('hi')\n"


def test_record_save_to_an_unwritable_dir_is_refused_before_running(tmp_path):
    marker = tmp_path / "ran"
    proc = run_tcx("record", "--save", "/proc/x", "--", "touch", str(marker))
    assert_clean_failure(proc, EXIT_USAGE, "--save '/proc/x' cannot be written")
    assert not marker.exists()


@pytest.mark.parametrize("width", ["0", "-3", "100000000"])
def test_width_out_of_range_is_a_usage_error(width):
    proc = run_tcx("show", str(SIMPLE_LOG), "--width", width)
    assert_clean_failure(proc, EXIT_USAGE, "Invalid value for '--width'")
    assert proc.stdout == ""


@pytest.mark.parametrize("seconds", ["nan", "inf", "0", "-1"])
@pytest.mark.parametrize("command", ["explain", "record"])
def test_timeout_must_be_a_positive_number(command, seconds):
    target = [str(PROGRAMS / "broken" / "hangs.py")] if command == "explain" else ["--", "true"]
    proc = run_tcx(command, f"--timeout={seconds}", *target, timeout=60)
    assert_clean_failure(proc, EXIT_USAGE, "Invalid value for '--timeout'", "greater than 0")


def test_call_dimension_beyond_int64_is_a_usage_error():
    proc = run_tcx("explain", f"{PROGRAMS / 'seed_f.py'}:f", "--call", "99999999999999999999999x2")
    assert_clean_failure(proc, EXIT_USAGE, "too large", "int64")


def test_run_options_with_a_log_target_are_noted(tmp_path):
    save = tmp_path / "copy.tcx"
    proc = run_tcx("explain", str(SIMPLE_LOG), "--backend", "inductor", "--timeout", "5", "--save", str(save))
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "note: --backend, --timeout, --save ignored: TARGET is a TORCH_TRACE log" in proc.stderr
    assert not save.exists()
    assert "note:" not in run_tcx("explain", str(SIMPLE_LOG)).stderr


# --- minor ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", ["1", None, 0, -1, True, 1.5])
def test_recording_with_an_invalid_version_is_unreadable(tmp_path, version):
    path = tmp_path / "odd.tcx"
    path.write_text(json.dumps({"kind": "header", "format": FORMAT_NAME, "version": version}) + "\n")
    proc = run_tcx("show", str(path))
    assert_clean_failure(proc, EXIT_INPUT, "unreadable recording", f"format version is {version!r}")
    assert "newer tcx" not in proc.stderr


def test_fifo_target_is_refused(tmp_path):
    fifo = tmp_path / "trace.log"
    os.mkfifo(fifo)
    for args in (["show", str(fifo)], ["explain", str(fifo)], ["explain", str(tmp_path / "p.py")]):
        if args[1].endswith(".py"):
            os.mkfifo(args[1])
        proc = run_tcx(*args, timeout=30)
        assert_clean_failure(proc, EXIT_USAGE, "is not a regular file (a FIFO, socket or device)")


def test_proc_directory_as_a_log_never_hangs():
    proc = run_tcx("show", "/proc/self/", timeout=30)
    assert_clean_failure(proc, EXIT_INPUT, "holds no TORCH_TRACE logs")


def test_show_limit_must_be_positive():
    proc = run_tcx("show", str(SIMPLE_LOG), "--event", "dynamo_start", "--limit", "0")
    assert_clean_failure(proc, EXIT_USAGE, "Invalid value for '--limit'")


def test_show_events_keeps_long_names_apart(tmp_path):
    log = tmp_path / "long.log"
    prefix = "V1206 15:18:21.105000 1500233 torch/x.py:1] "
    names = ["a_very_long_artifact_name_" * 4 + suffix for suffix in ("first", "second")]
    records = [
        prefix + json.dumps({"artifact": {"name": n, "encoding": "string"}, "frame_id": 0}) + "\n"
        for n in names
    ]
    log.write_text(SIMPLE_LOG.read_text().rstrip("\n") + "\n" + "".join(records))
    proc = run_tcx("show", str(log), "--events", "--width", "60")
    assert proc.returncode == EXIT_OK, proc.stderr
    # the event column, line by line: long names wrap onto the next lines, nothing is cut
    column = "".join(re.split(r"\s{2,}", line.strip())[0] for line in proc.stdout.splitlines())
    for name in names:
        assert f"artifact:{name}" in column
