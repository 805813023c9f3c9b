"""Shared helpers: run tcx as a user would (a subprocess), and read torch's own trace log.

Tests that record a real torch.compile run are marked `torch`; they compare tcx's numbers
with what torch itself wrote to its TORCH_TRACE log during the very same run.
"""

from __future__ import annotations

import hashlib
import json
import os
import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import pytest
import tcx_fork
from filelock import FileLock

# The suite is hermetic: variables that change how tcx (or rich, click) prints or behaves are
# cleared here, in the controller and in every xdist worker, and set by the tests that need them
# (run_tcx sets NO_COLOR and COLUMNS; colour tests set FORCE_COLOR). tests/test_hermetic.py runs
# part of the suite with each of them set.
ENV_CLEARED = ("NO_COLOR", "FORCE_COLOR", "CLICOLOR_FORCE", "COLUMNS", "LINES", "TCX_DEBUG", "TCX_COMPLETE")
# TCX_KEEP_KERNEL_CACHE: where a view turns the compile caches off, tcx keeps Inductor's compiled
# kernels (found by their source's hash) in the session's cache folder below, so gcc builds each kernel
# once per session; every stage still runs and is recorded (core/recorder/compat.py).
# PYTHONWARNINGS: a click warning (e.g. an option declared twice) is an error in every command the suite
# runs (set for all, so that every run shares one environment: tcx's warm process serves them all).
# TORCHINDUCTOR_VEC_ISA_OK: Inductor takes the vector instruction sets /proc/cpuinfo lists instead of
# building a probe library per set with gcc (about 5 CPU-seconds in each new cache folder: every
# `tcx cache` run's own, the cache tests') and loading it in a new Python (in every process that
# compiles). tests/test_hermetic.py checks that the probes pick the same sets on this machine.
ENV_FIXED = {
    "TERM": "xterm-256color",
    "TCX_KEEP_KERNEL_CACHE": "1",
    "PYTHONWARNINGS": "error::UserWarning:click.core",
    "TORCHINDUCTOR_VEC_ISA_OK": "1",
}
for _name in ENV_CLEARED:
    os.environ.pop(_name, None)
os.environ.update(ENV_FIXED)

REPO = Path(__file__).resolve().parent.parent
PROGRAMS = REPO / "fixtures" / "programs"
TRACE_FIXTURES = REPO / "fixtures" / "torch-trace"


def run_tcx(
    *args: str, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    """`python -m tcx ARGS` from the repository root (a fork of a process that imported tcx once,
    where the environment allows: tests/tcx_fork.py); returns the finished process."""
    full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", **(env or {})}
    return tcx_fork.run(list(args), full_env, REPO, timeout)


@dataclass
class TorchTrace:
    """Counts read straight from a TORCH_TRACE log with a deliberately separate, tiny parser."""

    graphs: int = 0
    graph_breaks: int = 0
    break_sites: set = field(default_factory=set)
    compile_ids: set = field(default_factory=set)
    recompiles: int = 0
    failed: set = field(default_factory=set)
    output_code: int = 0
    events: Counter = field(default_factory=Counter)


_LINE = re.compile(r"^[VIWEF]\d{4} [\d:.]+ +\d+ [^\]]*\] (\{.*\})\s*$")
_CONTEXT = ("frame_id", "frame_compile_id", "attempt", "has_payload", "stack", "compiled_autograd_id", "rank")


def torch_trace_records(directory: Path) -> list[tuple[str, dict, str]]:
    """(event name, metadata, payload) of every record torch wrote to its TORCH_TRACE log (the
    first log of a directory, or one log file).

    Deliberately tiny and separate from tcx's own parser, so tests compare tcx with torch."""
    logs = [directory] if directory.is_file() else sorted(directory.glob("*.log"))
    assert logs, f"torch wrote no TORCH_TRACE log in {directory}"
    records: list[tuple[str, dict, list[str]]] = []
    for line in logs[0].read_text().splitlines():
        if line.startswith("\t"):
            if records:
                records[-1][2].append(line[1:] + "\n")
            continue
        m = _LINE.match(line)
        if m:
            md = json.loads(m.group(1))
            records.append((next(k for k in md if k not in _CONTEXT), md, []))
    return [(name, md, "".join(payload)) for name, md, payload in records]


def compile_id(md: dict) -> str:
    return f"{md['frame_id']}/{md['frame_compile_id']}"


def read_torch_trace(directory: Path) -> TorchTrace:
    out = TorchTrace()
    for name, md, payload in torch_trace_records(directory):
        out.events[name] += 1
        cid = (md.get("frame_id"), md.get("frame_compile_id"))
        if name == "dynamo_start":
            out.compile_ids.add(cid)
        elif name == "dynamo_output_graph":
            out.graphs += 1
        elif name == "inductor_output_code":
            out.output_code += 1
        elif name == "compilation_metrics" and md[name].get("fail_type"):
            out.failed.add(cid)
        elif name == "artifact" and md["artifact"]["name"] == "recompile_reasons":
            out.recompiles += 1
        elif name == "artifact" and md["artifact"]["name"] == "dynamo_graph_break_reason":
            out.graph_breaks += 1
            out.break_sites.add(_break_site(payload))
    return out


def _break_site(text: str) -> tuple:
    where = re.search(r"Graph break in user code at (.+):(\d+)", text)
    skip = ("Encountered graph break when attempting", "Failed to handle graph break gracefully")
    reason_lines = text.split("Graph Break Reason:", 1)[1].splitlines()
    reason = next(ln.strip() for ln in reason_lines if ln.strip() and not ln.strip().startswith(skip))
    return (where.group(1) if where else None, where.group(2) if where else None, reason)


def explain_with_trace(
    target: str, tmp_path: Path, *extra: str
) -> tuple[dict, TorchTrace, subprocess.CompletedProcess]:
    """Run `tcx explain --format json` with TORCH_TRACE set: tcx's view and torch's log of one run."""
    trace_dir = tmp_path / "torch_trace"
    proc = run_tcx("explain", target, "--format", "json", *extra, env={"TORCH_TRACE": str(trace_dir)})
    assert proc.stdout, f"no JSON on stdout; stderr:\n{proc.stderr}"
    return json.loads(proc.stdout), read_torch_trace(trace_dir), proc


# One Inductor cache for the whole session (every xdist worker and every program a test runs):
# tcx runs a program with its compile caches as the program has them, so a program compiled once
# (by a plain `python prog.py` or by tcx) compiles from the cache afterwards. Private to the session,
# so the suite is hermetic: it neither reads nor fills the user's own cache.


def pytest_configure(config: pytest.Config) -> None:
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return  # the controller set it; workers inherit its environment
    folder = tempfile.mkdtemp(prefix="tcx-test-inductor-cache-")
    shared = tempfile.mkdtemp(prefix="tcx-test-shared-runs-")
    warm = tempfile.mkdtemp(prefix="tcx-test-warm-")  # private (0700), as TCX_WARM_DIR must be
    config.stash[_CACHE_KEY] = (folder, shared, warm)
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder
    os.environ["TRITON_CACHE_DIR"] = os.path.join(folder, "triton")
    os.environ[_SHARED_RUNS] = shared
    # Live runs start as forks of a process that imported torch once per environment (core/run/
    # warm.py): the recorder child and the program run as in a cold start, without paying ~5
    # CPU-seconds of imports each. Removing the folder at the end stops those processes.
    os.environ["TCX_WARM_DIR"] = warm


def pytest_unconfigure(config: pytest.Config) -> None:
    for folder in config.stash.get(_CACHE_KEY, ()):
        shutil.rmtree(folder, ignore_errors=True)


_CACHE_KEY = pytest.StashKey[tuple[str, ...]]()
_SHARED_RUNS = "TCX_TEST_SHARED_RUNS"  # the session's folder of shared runs (set by the controller)
T = TypeVar("T")


# ---------------------------------------------------------------- record once, assert many
#
# A run the suite makes (tcx on a program, or the program plainly under TORCH_TRACE) is made ONCE
# per session, whichever test or xdist worker asks first; every test that asks for the same run
# (same command, same environment) reads its result. One worker runs it under a file lock while
# the others wait. A test that must see a run of its own (signals, caches, a remedy re-run, files
# the program writes) calls run_tcx/subprocess itself and says why in its docstring.


@dataclass(frozen=True)
class SharedRun:
    """The session's one run of a command: its exit code and output, and its folder, which holds
    the recording (`--save`) and torch's own TORCH_TRACE log of the same run when asked for."""

    folder: Path
    returncode: int
    stdout: str
    stderr: str
    recording_name: str = "run.tcx"

    @property
    def recording(self) -> Path:
        return self.folder / self.recording_name

    @property
    def torch_trace(self) -> Path:
        return self.folder / "torch_trace"

    @property
    def output(self) -> Path:
        return self.folder / "output"

    def json(self) -> dict:
        assert self.stdout, f"no output on stdout; stderr:\n{self.stderr[-3000:]}"
        return json.loads(self.stdout)

    def ok(self) -> SharedRun:
        """This run, asserting it exited 0."""
        assert self.returncode == 0, f"exit {self.returncode}:\n{self.stderr[-3000:]}"
        return self


def shared_run(
    *args: str,
    python: bool = False,
    save: bool = False,
    compressed: bool = False,
    trace: bool = False,
    output: bool = False,
    env: dict[str, str] | None = None,
    timeout: float = 900,
) -> SharedRun:
    """`tcx ARGS` (or `python ARGS` with `python=True`: the program with no tcx), run once per session.

    `save` adds `--save FOLDER/run.tcx` (`run.tcx.gz` with `compressed`), `output` adds
    `-o FOLDER/output` (a report too big to keep as text), `trace` sets TORCH_TRACE to
    FOLDER/torch_trace."""
    name = "run.tcx.gz" if compressed else "run.tcx"
    key = json.dumps([python, args, save and name, trace, output, sorted((env or {}).items())])
    folder = Path(os.environ[_SHARED_RUNS]) / hashlib.sha1(key.encode()).hexdigest()[:16]
    done = folder / "result.json"
    with FileLock(str(folder) + ".lock"):
        if not done.exists():
            folder.mkdir(exist_ok=True)
            (folder / "command.json").write_text(key)
            full_env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "120", **(env or {})}
            if trace:
                full_env["TORCH_TRACE"] = str(folder / "torch_trace")
            argv = list(args)
            if save:
                argv += ["--save", str(folder / name)]
            if output:
                argv += ["-o", str(folder / "output")]
            if python:
                proc = tcx_fork.run_python(argv, full_env, REPO, timeout)
            else:
                proc = tcx_fork.run(argv, full_env, REPO, timeout)
            done.write_text(json.dumps([proc.returncode, proc.stdout, proc.stderr]))
    returncode, stdout, stderr = json.loads(done.read_text())
    return SharedRun(folder, returncode, stdout, stderr, name)


def shared_value(name: str, make: Callable[[Path], T]) -> T:
    """`make(FOLDER)` run once per session under `name`, whichever xdist worker asks first (the others
    wait, then read its pickled result): for a module's runs that are not one command (several runs,
    files written beside the program). FOLDER is the run's own, kept for the session. A `make` that
    raises is not kept: the next test to ask runs it again and sees the same failure."""
    # A short name: a warm process's socket under it must fit a Unix socket path (107 bytes).
    folder = Path(os.environ[_SHARED_RUNS]) / f"v{hashlib.sha1(name.encode()).hexdigest()[:8]}"
    done = folder / "result.pickle"
    with FileLock(str(folder) + ".lock"):
        if not done.exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            value = make(folder)
            done.write_bytes(pickle.dumps(value))
            return value
    return pickle.loads(done.read_bytes())


def plain_trace(program: str, *args: str) -> TorchTrace:
    """torch's own counts of `python PROGRAM ARGS` (no tcx anywhere), run once per session."""
    run = shared_run(str(PROGRAMS / program), *args, python=True, trace=True).ok()
    return read_torch_trace(run.torch_trace)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A test that renders a session recording depends on an Inductor run: mark it so."""
    for item in items:
        if "recorded" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.inductor)
            item.add_marker(pytest.mark.torch)


def tool(name: str, why: str) -> str:
    """The path of an external tool a test compares with or drives. Missing, it skips that test on
    a developer's machine and fails it in CI (`.ci/run` sets CI=true and installs every tool), so
    CI never passes by skipping."""
    local = Path(sys.executable).parent / name
    found = str(local) if local.exists() else shutil.which(name)
    if found:
        return found
    message = f"{name} is not installed ({why})"
    if os.environ.get("CI"):
        pytest.fail(f"{message}: CI must install it (.ci/run)")
    pytest.skip(f"{message}: only this comparison is skipped")


def module(name: str) -> None:
    """`pytest.importorskip`, except in CI, where a missing module fails the test (see `tool`)."""
    import importlib.util

    if importlib.util.find_spec(name) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{name} is not installed: CI must install it (make setup's extras)")
        pytest.skip(f"{name} is not installed: only this check is skipped")


@pytest.fixture
def program():
    def path(name: str) -> str:
        return str(PROGRAMS / name)

    return path


# Programs the views' tests share. Each is recorded ONCE per test session (across xdist
# workers) by `tcx report` with every capture on, next to torch's own TORCH_TRACE log of the
# same run; the views' tests render the saved recording instead of running the program again.
# `recorded`: through Inductor (graphs, fusion, kernels); `dynamo_recorded`: the whole script
# under fixtures/programs/ with the eager backend (breaks, guards, trace, bytecode, recompiles).
RECORDED_PROGRAMS: dict[str, tuple[str, ...]] = {
    "seed_f": ("fixtures/programs/seed_f.py:f", "--call", "128x32:grad,32x64:grad,64:grad"),
    "train_step": ("fixtures/programs/train_step.py:step",),
    "tiny_llama": ("fixtures/programs/models/tiny_llama.py",),
    "nano_train_eval": ("fixtures/programs/models/nano_train_eval.py",),
}


@dataclass(frozen=True)
class Recorded:
    """One recorded run: tcx's saved recording, torch's own log of it, and tcx's report of it."""

    recording: Path
    torch_trace: Path
    report_path: Path

    @property
    def report(self) -> dict:
        """`tcx report --format json` of the live run (read on demand: it can be tens of MB)."""
        return json.loads(self.report_path.read_text())

    def view(self, name: str, *extra: str) -> dict:
        """`tcx VIEW RECORDING --format json`: a view rendered from the saved recording (no run; once
        per session for the same view and options)."""
        return shared_run(name, str(self.recording), "--format", "json", *extra).ok().json()


def _session_recorder(argv: Callable[[str], tuple[str, ...]]) -> Callable[[str], Recorded]:
    def get(name: str) -> Recorded:
        run = shared_run("report", *argv(name), "--format", "json", save=True, output=True, trace=True)
        assert run.returncode == 0, f"recording {name} failed:\n{run.stderr[-3000:]}"
        return Recorded(run.recording, run.torch_trace, run.output)

    return get


@pytest.fixture(scope="session")
def recorded() -> Callable[[str], Recorded]:
    """`recorded("seed_f")`: the session's one Inductor recording of that program (made on first use)."""
    return _session_recorder(RECORDED_PROGRAMS.__getitem__)


@pytest.fixture(scope="session")
def dynamo_recorded() -> Callable[[str], Recorded]:
    """`dynamo_recorded("demo.py")`: the session's one eager-backend recording of that fixture program."""
    return _session_recorder(lambda name: (str(PROGRAMS / name), "--backend", "eager"))


@pytest.fixture
def explained(
    dynamo_recorded: Callable[[str], Recorded],
) -> Callable[[str], tuple[dict, TorchTrace, Recorded]]:
    """`explained("demo.py")`: tcx's explain JSON of the session's recording, and torch's log of that run."""

    def get(name: str) -> tuple[dict, TorchTrace, Recorded]:
        run = dynamo_recorded(name)
        return run.view("explain"), read_torch_trace(run.torch_trace), run

    return get


def cuda_preview(program: Path, folder: Path, *extra: str) -> tuple[str, dict, int, str, str]:
    """`tcx codegen PROGRAM --target cuda:sm_90 --show-output --format json EXTRA`, saved to
    FOLDER/preview.tcx with torch's own log in FOLDER/torch_trace (no GPU: CUDA_VISIBLE_DEVICES is
    empty): (FOLDER, its JSON or {}, exit code, stdout, stderr), picklable for `shared_value`."""
    proc = run_tcx(
        "codegen",
        str(program),
        "--target",
        "cuda:sm_90",
        "--show-output",
        *extra,
        "--format",
        "json",
        "--save",
        str(folder / "preview.tcx"),
        env={"TORCH_TRACE": str(folder / "torch_trace"), "CUDA_VISIBLE_DEVICES": ""},
        timeout=600,
    )
    doc = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return str(folder), doc, proc.returncode, proc.stdout, proc.stderr
