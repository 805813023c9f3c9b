"""TCX_WARM_DIR: a live run starts as a fork of a process that imported torch once, and is the same
run a cold start makes — its counts, its folder and environment, its output and exit status, a
signal that ends it, a timeout that stops it.

The tests share one warm folder of their own (not the session's): its first run starts cold and
leaves a mark, the second starts the warm process and forks from it, later ones fork. Which process
a run's program ran under is the program's own observation: its parent's command line.

`tcx fix` and `tcx cost` keep a warm process of their own where TCX_WARM_DIR is unset: the fix tests
below run without it, and compare with the same command with TCX_WARM_DIR=off (every run cold).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import REPO, read_torch_trace, shared_value

pytestmark = [pytest.mark.torch]

EXIT_HANDLER_PRINTS = "printed by the program's exit handler"
PROBE = """\
import json, os, sys
import torch

parent = open(f"/proc/{os.getppid()}/cmdline", "rb").read().split(b"\\0")
with open(sys.argv[1], "a") as out:  # a line per run (`tcx cache` runs it several times)
    print(json.dumps({"parent": [p.decode() for p in parent if p], "ppid": os.getppid(), "cwd": os.getcwd(),
                      "columns": os.environ.get("COLUMNS"), "argv": sys.argv[1:],
                      "cache": os.environ.get("TORCHINDUCTOR_CACHE_DIR")}), file=out)

@torch.compile(backend="eager")
def f(x):
    x = x.sin()
    print("between graphs")
    return x.cos()

f(torch.ones(3))
if len(sys.argv) > 2 and sys.argv[2] == "exit":
    sys.exit(3)
if len(sys.argv) > 2 and sys.argv[2] == "segfault":
    import ctypes
    ctypes.string_at(0)
if len(sys.argv) > 2 and sys.argv[2] == "hang":
    import time
    time.sleep(600)
if len(sys.argv) > 2 and sys.argv[2] == "atexit":
    import atexit
    atexit.register(lambda: print("EXIT_HANDLER_PRINTS", file=sys.stderr))
""".replace("EXIT_HANDLER_PRINTS", EXIT_HANDLER_PRINTS)


class Warm:
    """tcx with its own warm folder; `run` returns the finished process and what the program saw."""

    def __init__(self, folder: Path, program: Path) -> None:
        self.folder, self.program = folder, program

    def run(self, *args: str, mode: str = "", cwd: Path | None = None, columns: str = "120", **env: str):
        proc, seen = self.runs(*args, mode=mode, cwd=cwd, columns=columns, **env)
        assert len(seen) <= 1, seen
        return proc, (seen[0] if seen else None)

    def runs(self, *args: str, mode: str = "", cwd: Path | None = None, columns: str = "120", **env: str):
        """The finished tcx process and what each run of the program saw, in order."""
        seen = self.folder.parent / f"seen-{time.monotonic_ns()}.json"
        env = {**os.environ, "TCX_WARM_DIR": str(self.folder), "NO_COLOR": "1", "COLUMNS": columns, **env}
        proc = subprocess.run(
            [sys.executable, "-m", "tcx", *args, str(self.program), "--no-save", "--", str(seen), mode],
            cwd=cwd or REPO,
            env={**env, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=300,
        )
        lines = seen.read_text().splitlines() if seen.exists() else []
        return proc, [json.loads(line) for line in lines]


def forked(seen: dict) -> bool:
    return any(part.endswith("warm_boot.py") for part in seen["parent"])


@dataclass
class Warmed:
    """A warm folder after its first three runs (made once per test process: each xdist worker has
    its own), and those runs."""

    tcx: Warm
    runs: list


@pytest.fixture(scope="module")
def warmed(tmp_path_factory) -> Iterator[Warmed]:
    base = tmp_path_factory.mktemp("warm")
    folder = base / "warm"
    folder.mkdir(mode=0o700)
    program = base / "probe.py"
    program.write_text(PROBE)
    tcx = Warm(folder, program)
    runs = [tcx.run("explain", "--backend", "eager", "--format", "json", mode="atexit") for _ in range(3)]
    yield Warmed(tcx, runs)
    shutil.rmtree(folder, ignore_errors=True)  # its warm process exits when its socket is gone


@pytest.fixture
def warm(warmed: Warmed) -> Warm:
    return warmed.tcx


def test_the_second_run_forks_and_counts_as_the_cold_run(warmed: Warmed) -> None:
    runs = warmed.runs
    for proc, _ in runs:
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert [forked(seen) for _, seen in runs] == [False, True, True]
    docs = [json.loads(proc.stdout) for proc, _ in runs]
    keys = ("graph_count", "graph_break_count", "compile_count", "recompile_count")
    assert (
        {k: docs[2][k] for k in keys}
        == {k: docs[1][k] for k in keys}
        == {k: docs[0][k] for k in keys}
        == {
            "graph_count": 2,
            "graph_break_count": 1,
            "compile_count": 2,
            "recompile_count": 0,
        }
    )
    assert [b["user_stack"][-1]["line"] for b in docs[2]["graph_breaks"]] == [
        b["user_stack"][-1]["line"] for b in docs[0]["graph_breaks"]
    ]
    # a fork's Python shuts down as a cold one does: after the program ended, what its own exit handler
    # printed and nothing else (what the warm process froze before forking printed as leaks of triton's
    # bindings there; a fork whose teardown is quiet before the program's handler ran would print none)
    tails = [doc["program"]["output_tail"] for doc in docs]
    assert tails[2] == tails[1] == tails[0], tails
    after = f"[… {len(EXIT_HANDLER_PRINTS) + 1} bytes printed after the program ended"
    assert [sum(line.startswith(after) for line in tail) for tail in tails] == [1, 1, 1], tails
    assert len(list(warmed.tcx.folder.glob("*.sock"))) == 1


def test_the_fork_runs_in_the_runs_folder_with_its_environment(warm: Warm, tmp_path: Path) -> None:
    proc, seen = warm.run("explain", "--backend", "eager", cwd=tmp_path, columns="97")
    assert proc.returncode == 0, proc.stderr[-3000:]
    # a different terminal width is the same environment at import: still a fork
    assert forked(seen) and seen["cwd"] == str(tmp_path) and seen["columns"] == "97"


def test_the_fork_writes_torchs_own_log_where_the_runs_torch_trace_says(warm: Warm, tmp_path: Path) -> None:
    """torch reads TORCH_TRACE once, at import: the fork has it read its run's folder again."""
    for name in ("a", "b"):
        proc, seen = warm.run(
            "explain", "--backend", "eager", "--format", "json", TORCH_TRACE=str(tmp_path / name)
        )
        assert forked(seen) and proc.returncode == 0, proc.stderr[-3000:]
        torch_log = read_torch_trace(tmp_path / name)
        doc = json.loads(proc.stdout)
        assert (
            (torch_log.graphs, torch_log.graph_breaks)
            == (doc["graph_count"], doc["graph_break_count"])
            == (2, 1)
        )
    assert not list(warm.folder.parent.glob("*.log"))  # nothing written where no run asked


def test_an_exit_status_and_a_signal_come_through_the_fork(warm: Warm) -> None:
    exited, seen = warm.run("explain", "--backend", "eager", "--format", "json", mode="exit")
    assert forked(seen) and exited.returncode == 3, exited.stderr[-3000:]
    assert json.loads(exited.stdout)["program"] == {
        **json.loads(exited.stdout)["program"],
        "status": "exit",
        "exit_code": 3,
    }
    crashed, seen = warm.run("explain", "--backend", "eager", "--format", "json", mode="segfault")
    assert forked(seen) and crashed.returncode == 3, crashed.stderr[-3000:]
    assert json.loads(crashed.stdout)["program"]["status"] == "crashed"
    assert json.loads(crashed.stdout)["program"]["signal"] == "SIGSEGV"


def test_a_timeout_stops_the_forked_program(warm: Warm) -> None:
    """The fork has torch imported: the probe writes what it saw at once, well within the timeout."""
    proc, seen = warm.run("explain", "--backend", "eager", "--timeout", "4", "--format", "json", mode="hang")
    assert forked(seen) and proc.returncode == 3, proc.stderr[-3000:]
    assert json.loads(proc.stdout)["program"]["status"] == "timeout"


def test_a_warm_process_that_exited_is_started_again_by_the_next_run(warm: Warm) -> None:
    """It exits after IDLE_S without a run, or when its socket is removed (here): it takes its start
    mark with it, and the next run starts another and forks from it rather than starting cold."""
    proc, before = warm.run("explain", "--backend", "eager")
    assert proc.returncode == 0 and forked(before), proc.stderr[-3000:]
    socket_path = Path(next(p for p in before["parent"] if p.endswith(".sock")))
    started = socket_path.with_suffix(".started")
    assert started.exists()
    socket_path.unlink()
    deadline = time.monotonic() + 30
    while started.exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not started.exists()  # the process is gone, and its mark with it
    proc, after = warm.run("explain", "--backend", "eager")
    assert proc.returncode == 0 and forked(after), proc.stderr[-3000:]
    assert after["ppid"] != before["ppid"] and socket_path.exists() and started.exists()


def test_the_cuda_preview_forks_from_a_warm_process_of_its_own(warm: Warm) -> None:
    """The preview's stand-in for the CUDA device loads before torch: its runs have their own warm
    process, started with it, and print what the cold preview run printed; other runs do not fork
    from it."""
    preview = ("codegen", "--target", "cuda:sm_90", "--format", "json")
    runs = [warm.run(*preview) for _ in range(3)]
    for proc, _ in runs:
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert [forked(seen) for _, seen in runs] == [False, True, True]
    assert all("preview" in seen["parent"] for _, seen in runs[1:])
    docs = [json.loads(proc.stdout) for proc, _ in runs]
    assert docs[0]["preview"] is True and docs[0]["device"] == "cuda:sm_90"
    for key in ("preview", "device", "kernel_count", "unavailable", "preview_notes", "preview_errors"):
        assert docs[2][key] == docs[1][key] == docs[0][key], key
    other, seen = warm.run("explain", "--backend", "eager")
    assert other.returncode == 0 and forked(seen) and "preview" not in seen["parent"], other.stderr[-3000:]


def test_a_folder_others_may_write_to_is_not_used(tmp_path: Path) -> None:
    folder = tmp_path / "open"
    folder.mkdir()
    folder.chmod(0o777)
    program = tmp_path / "probe.py"
    program.write_text(PROBE)
    proc, seen = Warm(folder, program).run("explain", "--backend", "eager")
    assert proc.returncode == 0 and not forked(seen), proc.stderr[-3000:]
    assert list(folder.iterdir()) == []  # not even the mark a first run leaves


# `tcx fix` on a program with a print break (two remedies: a config, and a rewrite of the file run
# from a copy with the program's folder on PYTHONPATH), which imports a module beside it.
FIX_PROBE = """\
import json, os, sys
import torch
from probe_helper import SCALE

parent = open(f"/proc/{os.getppid()}/cmdline", "rb").read().split(b"\\0")
with open(os.environ["PROBE_LOG"], "a") as out:
    out.write(json.dumps({"parent": [p.decode() for p in parent if p], "ppid": os.getppid(),
                          "file": __file__, "path": sys.path[:2]}) + "\\n")

@torch.compile(backend="eager")
def step(x):
    y = torch.tanh(x * SCALE)
    print("step y:", y.shape)
    return y

for n in (4, 4, 4):
    step(torch.ones(n))
"""


@dataclass
class FixRun:
    doc: dict
    runs: list[dict]  # what the program saw in each run, in order
    tmp: Path  # the command's TMPDIR


def _fix(base: Path, name: str, warm_dir: str | None) -> FixRun:
    folder = base / name
    (folder / "tmp").mkdir(parents=True)
    (folder / "program").mkdir()
    program = folder / "program" / "probe.py"
    program.write_text(FIX_PROBE)
    (folder / "program" / "probe_helper.py").write_text("SCALE = 2\n")
    env = {k: v for k, v in os.environ.items() if k != "TCX_WARM_DIR"}
    env.update(NO_COLOR="1", PROBE_LOG=str(folder / "runs.jsonl"), TMPDIR=str(folder / "tmp"))
    if warm_dir is not None:
        env["TCX_WARM_DIR"] = warm_dir
    proc = subprocess.run(
        [sys.executable, "-m", "tcx", "fix", str(program), "--no-save", "--format", "json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    runs = [json.loads(line) for line in (folder / "runs.jsonl").read_text().splitlines()]
    return FixRun(json.loads(proc.stdout), runs, folder / "tmp")


FixRuns = tuple[FixRun, FixRun]


def _fix_pair(base: Path) -> FixRuns:
    return _fix(base, "warm", None), _fix(base, "cold", "off")


@pytest.fixture
def fix_runs() -> FixRuns:
    """`tcx fix` with its own warm process (TCX_WARM_DIR unset), and every run cold (=off): made once
    per session, whichever xdist worker asks first."""
    return shared_value("test_warm fix pair", _fix_pair)


def test_the_reruns_of_tcx_fix_fork_from_its_own_warm_process(fix_runs: FixRuns) -> None:
    warm, cold = fix_runs
    assert len(warm.runs) == len(cold.runs) == 3  # the baseline, the config, the rewritten copy
    assert [forked(r) for r in warm.runs] == [False, True, True]
    assert [forked(r) for r in cold.runs] == [False, False, False]
    assert len({r["ppid"] for r in warm.runs[1:]}) == 1  # one warm process for the command


def test_the_rewritten_copy_runs_forked_with_the_programs_folder_on_its_path(
    fix_runs: FixRuns,
) -> None:
    """The copy imports probe_helper from the program's folder (PYTHONPATH): the fork put it on
    sys.path just after the copy's own folder, as Python does at start-up in the cold run."""
    warm, cold = fix_runs
    for fix in (warm, cold):
        copy = next(r for r in fix.runs if not r["file"].endswith("/program/probe.py"))
        assert copy["path"] == [os.path.dirname(copy["file"]), str(fix.tmp.parent / "program")]
    assert forked(next(r for r in warm.runs if not r["file"].endswith("/program/probe.py")))


def test_tcx_fix_with_its_warm_process_counts_and_judges_as_cold_runs(
    fix_runs: FixRuns,
) -> None:
    warm, cold = fix_runs
    keys = ("graph_breaks", "graphs", "recompiles")

    def judged(doc: dict) -> list:
        return [
            (r["change"], r["verified"], r["outputs_match"], {k: r["after"][k] for k in keys})
            for r in doc["remedies"]
        ]

    assert {k: warm.doc["before"][k] for k in keys} == {k: cold.doc["before"][k] for k in keys}
    assert judged(warm.doc) == judged(cold.doc)
    # the print moved after the call is verified; the config torch refuses for this print is not
    assert {"reorderable" in change: v for change, v, _, _ in judged(warm.doc)} == {False: True, True: False}


def test_the_commands_warm_process_and_its_folder_are_gone_when_it_ends(
    fix_runs: FixRuns,
) -> None:
    warm, _ = fix_runs
    server = warm.runs[1]["ppid"]
    assert (
        not Path(f"/proc/{server}").exists()
        or b"warm_boot" not in Path(f"/proc/{server}/cmdline").read_bytes()
    )
    assert not [p.name for p in warm.tmp.iterdir() if p.name.startswith("tcx-warm-")]


def test_tcx_caches_runs_all_fork_from_one_warm_process_of_its_own(tmp_path: Path) -> None:
    """`tcx cache` runs the program cold, then warm, in a private cache folder no other command shares:
    every run, the cold one too, forks from one warm process of the command's own, started with the
    cold run and gone with the command (TCX_WARM_DIR's folder stays unused: a warm process there would
    outlive the command for nothing). That process compiled nothing: tests/test_cache.py's live runs
    (forked the same way) hold that the cold run misses and the warm one hits."""
    folder = tmp_path / "warm"
    folder.mkdir(mode=0o700)
    program = tmp_path / "probe.py"
    program.write_text(PROBE)
    proc, seen = Warm(folder, program).runs("cache", "--backend", "eager", "--runs", "2", "--format", "json")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["label"] for r in json.loads(proc.stdout)["runs"]] == ["cold", "warm 1", "warm 2"]
    assert [forked(s) for s in seen] == [True, True, True]
    assert len({s["ppid"] for s in seen}) == 1 and "tied" in seen[0]["parent"]
    assert len({s["cache"] for s in seen}) == 1 and seen[0]["cache"] != os.environ["TORCHINDUCTOR_CACHE_DIR"]
    assert not Path(seen[0]["cache"]).exists()  # the private cache folder is removed with the command
    assert list(folder.iterdir()) == []
    server = seen[0]["ppid"]
    assert (
        not Path(f"/proc/{server}").exists()
        or b"warm_boot" not in Path(f"/proc/{server}/cmdline").read_bytes()
    )


def test_a_fork_takes_a_new_path_entry_unless_it_holds_a_module_already_imported(tmp_path: Path) -> None:
    """The warm process's check (run here, in this test's own process): a folder with a module of
    its own is put on the path; one holding `json` (imported here) or a sitecustomize starts cold."""
    from tcx.core.recorder.warm import path_for

    own, clean, shadow, site = (tmp_path / n for n in ("own", "clean", "shadow", "site"))
    for folder, module in (
        (own, "own_mod"),
        (clean, "probe_helper"),
        (shadow, "json"),
        (site, "sitecustomize"),
    ):
        folder.mkdir()
        (folder / f"{module}.py").write_text("")

    def request(*entries: Path | str) -> dict:
        return {"env": {"PYTHONPATH": os.pathsep.join(map(str, entries))}, "cwd": str(tmp_path)}

    assert path_for(request(own), [str(own)]) == [str(own)]
    assert path_for(request("clean", own, "clean"), [str(own)]) == [str(clean), str(own)]  # as Python: once
    assert path_for(request(shadow, own), [str(own)]) is None
    assert path_for(request(site), []) is None
    assert path_for(request(clean), [], known=False) is None
    assert (
        path_for({"env": {}, "cwd": str(tmp_path)}, [os.path.dirname(json.__file__)]) is None
    )  # json from there
