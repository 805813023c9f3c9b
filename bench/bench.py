"""tcx benchmark harness: the numbers behind DESIGN.md's "Quality bars".

`make bench` runs `python bench/bench.py`. Every measurement is a real subprocess, timed
from the outside (wall clock, plus the CPU time of the process tree through
`getrusage(RUSAGE_CHILDREN)`). The two sides of a comparison run interleaved, in
alternating order, so that drift in machine load hits both sides alike; each side's
median over `--runs` runs goes into the table and into bench/results/latest.json.

Measurements:

1. explain vs program: `tcx explain PROGRAM --format json`, which runs the program as it runs
   (its own backend, Inductor, with its compile caches), against the program run plainly:
   both warm (one shared TORCHINDUCTOR_CACHE_DIR, warmed once before timing: the program's
   own second run) and both cold (a fresh TORCHINDUCTOR_CACHE_DIR every run).
2. `tcx --help` start-up, with `python -c pass` as the floor, and whether `tcx --help`
   imports torch (it must not).
3. Recording overhead at equal backend: `tcx explain PROGRAM --backend B` against the
   program run through a small wrapper that forces the same backend onto torch.compile
   and disables caches the way tcx's recorder does. One extra `--save` run splits tcx's
   time into the recorder child and the parent (start-up, analysis, rendering).
4. Per-instruction capture: `tcx trace models/tiny_llama.py --format json` (Dynamo's
   simulated stack and FX nodes per instruction) against `tcx explain` of the same program.
5. Per-call capture: `tcx recompiles recompiles/hot_loop.py` (3020 calls of two compiled functions)
   against `tcx explain` of the same program; the cost capture (`tcx cost --no-eager`: every call
   timed, the steady ones profiled) against the same `tcx explain`, `tcx cost` with its eager run beside.
   The step `tcx cost` measures: on the nanoGPT-style loop cost/nano_train.py (Inductor; aot_eager
   with --skip-inductor), its train step time against the same program's own time.perf_counter loop
   of the same steps run plainly (goal: within 10%), and its speedup interval against a plain
   eager-vs-compiled comparison of the program's own step medians (goal: the interval covers it).
6. Warm start: `tcx cache cache/tiny.py` (a cold run, then a warm one, with a private cache
   directory) against running the program twice with plain `python` and a fresh shared
   TORCHINDUCTOR_CACHE_DIR (skipped with `--skip-inductor`).
7. The test suite: `make test` and `make test-fast` as a developer runs them, `--runs` times each
   (median), in seconds against their goals (600 s and 90 s on a 2-core machine); `--only-suite`
   runs just these (the suite's speed is measured here, never in a timed test).

Flags: `--runs N` (default 3), `--quick` (one run), `--skip-inductor` (skip the slow
measurement 1), `--skip-tests` (skip measurement 6), `--backend B` (measurement 3), `--output FILE`,
`--skip-big` / `--only-big` (the big-run rows), `--only-suite` (measurement 7), `--regen-log` (write the
large log again), `--log FILE` (an existing large log instead; `TCX_BENCH_LOG=FILE make bench` too).
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import advice  # bench/ is not a package
import big_runs

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "fixtures" / "programs"
RESULTS = Path(__file__).resolve().parent / "results"
PYTHON = sys.executable

# The goals from DESIGN.md "Quality bars".
GOAL_EXPLAIN_RATIO = 1.15
GOAL_OVERHEAD_RATIO = 1.10
GOAL_HELP_S = 0.30
GOAL_INGEST_RATIO = 1.0
GOAL_TRACE_RATIO = 1.50
GOAL_CALLS_RATIO = 1.25
GOAL_CACHE_RATIO = 1.25
GOAL_COST_RATIO = 1.30
GOAL_NUMERICS_RATIO = 3.0
GOAL_STEP_RATIO = 1.10  # tcx cost's step time within 10% of a plain timed loop of the same steps
GOAL_TEST_SUITE_S = 600.0  # make test on this 2-core machine
GOAL_TEST_FAST_S = 90.0  # make test-fast, the inner loop
LARGE_LOG_DIR = RESULTS / "large_trace"

# Cheap commands (start-up timings) get at least this many samples: one run is noise.
MIN_CHEAP_RUNS = 7

# Environment variables that would change what torch does or prints; never inherited.
SCRUBBED_ENV = (
    "TORCH_LOGS",
    "TORCH_TRACE",
    "TORCH_COMPILE_DEBUG",
    "TORCHDYNAMO_VERBOSE",
    "TORCHINDUCTOR_CACHE_DIR",
    "TORCHINDUCTOR_FORCE_DISABLE_CACHES",
    "TORCH_COMPILE_FORCE_DISABLE_CACHES",
    "TCX_DEBUG",
)

# Runs PROGRAM as __main__ with every torch.compile() forced onto BACKEND and compile
# caches disabled: the plain twin of `tcx explain PROGRAM --backend BACKEND`.
WRAPPER = '''\
"""bench: run argv[2] as __main__ with torch.compile(backend=argv[1]), caches disabled."""
import os
import runpy
import sys

import torch

backend, script = sys.argv[1], os.path.abspath(sys.argv[2])
original = torch.compile
calls = []


def compile(model=None, **kwargs):
    calls.append(kwargs.get("backend", "inductor"))
    kwargs["backend"] = backend
    if backend != "inductor":
        kwargs.pop("mode", None)
        kwargs.pop("options", None)
    return original(model, **kwargs) if model is not None else original(**kwargs)


torch.compile = compile
torch.compiler.config.force_disable_caches = True
sys.argv = [script, *sys.argv[3:]]
sys.path[0] = os.path.dirname(script)
runpy.run_path(script, run_name="__main__")
if not calls:
    sys.exit("bench wrapper: the program never called torch.compile")
'''

# Prints which heavy modules importing the CLI and rendering `--help` pulls in.
IMPORT_PROBE = """\
import json, sys
from tcx.cli.main import main
try:
    main(sys.argv[1:])
except SystemExit:
    pass
heavy = ("torch", "rich", "pygments")
print("@@" + json.dumps(sorted(m for m in heavy if m in sys.modules)))
"""


class BenchError(Exception):
    """A benchmarked command failed or produced output the bench cannot trust."""


@dataclass
class Sample:
    """One timed run of a command."""

    wall_s: float
    cpu_s: float


@dataclass
class Command:
    """A command line to time, with its extra environment and an optional output check."""

    label: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    fresh_cache: bool = False
    check: Callable[[str], None] | None = None
    samples: list[Sample] = field(default_factory=list)

    def median_wall(self) -> float:
        return statistics.median(s.wall_s for s in self.samples)

    def median_cpu(self) -> float:
        return statistics.median(s.cpu_s for s in self.samples)

    def summary(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "argv": self.argv,
            "env": self.env,
            "fresh_inductor_cache_dir": self.fresh_cache,
            "median_wall_s": round(self.median_wall(), 4),
            "median_cpu_s": round(self.median_cpu(), 4),
            "samples": [asdict(s) for s in self.samples],
        }


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in SCRUBBED_ENV}
    env["PYTHONUNBUFFERED"] = "1"
    return env


def run_once(cmd: Command) -> Sample:
    """Run `cmd` once; raise BenchError (with its output tail) when it fails."""
    env = {**base_env(), **cmd.env}
    cache_dir = tempfile.mkdtemp(prefix="tcx-bench-cache-") if cmd.fresh_cache else None
    if cache_dir:
        env["TORCHINDUCTOR_CACHE_DIR"] = cache_dir
    try:
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            proc = subprocess.run(
                cmd.argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=err
            )
            wall = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            out.seek(0)
            stdout = out.read().decode("utf-8", "replace")
            err.seek(0)
            stderr = err.read().decode("utf-8", "replace")
    finally:
        if cache_dir:
            shutil.rmtree(cache_dir, ignore_errors=True)
    if proc.returncode != 0:
        tail = "\n".join((stdout + stderr).splitlines()[-20:])
        raise BenchError(f"{cmd.label}: exit code {proc.returncode}\n{tail}")
    if cmd.check:
        cmd.check(stdout)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Sample(wall_s=wall, cpu_s=cpu)


def measure(commands: Sequence[Command], runs: int, quiet: bool = False) -> None:
    """Time `commands` `runs` times each, interleaved, reversing the order every other run."""
    for i in range(runs):
        order = commands if i % 2 == 0 else list(reversed(commands))
        for cmd in order:
            sample = run_once(cmd)
            cmd.samples.append(sample)
            if not quiet:
                print(
                    f"  run {i + 1}/{runs}  {cmd.label:<36} {sample.wall_s:7.3f} s wall"
                    f"  {sample.cpu_s:7.3f} s cpu",
                    file=sys.stderr,
                    flush=True,
                )


def tcx_argv() -> list[str]:
    """The installed `tcx` script next to this interpreter, else `python -m tcx`."""
    script = Path(PYTHON).parent / "tcx"
    return [str(script)] if script.exists() else [PYTHON, "-m", "tcx"]


def explain_check(backend: str, min_breaks: int = 0) -> Callable[[str], None]:
    """Check that `tcx explain --format json` output used `backend` and saw compiles."""

    def check(stdout: str) -> None:
        try:
            report = json.loads(stdout)
        except json.JSONDecodeError as exc:
            raise BenchError(f"tcx explain did not print JSON ({exc}): {stdout[:200]!r}") from exc
        used = (report.get("backend") or {}).get("name")
        if used != backend:
            raise BenchError(f"tcx explain used backend {used!r}, expected {backend!r}")
        if not report.get("compile_count"):
            raise BenchError("tcx explain recorded no compiles")
        if report.get("graph_break_count", 0) < min_breaks:
            raise BenchError(f"tcx explain recorded fewer than {min_breaks} graph break(s)")

    return check


def explain_vs_program(runs: int, workdir: Path) -> list[dict[str, Any]]:
    """`tcx explain PROGRAM` runs the program as it runs (its own backend, Inductor, and its
    compile caches): against the program's own warm run (one shared cache, warmed once before
    timing) and against its own cold run (a fresh cache each run, on both sides)."""
    rel = str((PROGRAMS / "demo.py").relative_to(ROOT))
    argv = [*tcx_argv(), "explain", rel, "--format", "json", "--no-save"]
    warm_env = {"TORCHINDUCTOR_CACHE_DIR": str(workdir / "warm-cache")}
    run_once(Command("warm the cache", [PYTHON, rel], env=warm_env))
    warm = [
        Command("tcx explain (as it runs, warm)", argv, env=warm_env, check=explain_check("inductor", 1)),
        Command("python program (warm)", [PYTHON, rel], env=warm_env),
    ]
    cold = [
        Command("tcx explain (as it runs, cold)", argv, fresh_cache=True, check=explain_check("inductor", 1)),
        Command("python program (cold)", [PYTHON, rel], fresh_cache=True),
    ]
    measure(warm, runs)
    measure(cold, runs)
    what = "demo.py: tcx explain vs the program's own run, {} caches (backend inductor, as it runs)"
    return [
        comparison("explain vs program (warm)", what.format("warm"), *warm, GOAL_EXPLAIN_RATIO),
        comparison("explain vs program (cold)", what.format("cold"), *cold, GOAL_EXPLAIN_RATIO),
    ]


def trace_check(stdout: str) -> None:
    """`tcx trace --format json` printed its schema with instructions recorded."""
    try:
        report = json.loads(stdout)
    except json.JSONDecodeError as exc:
        raise BenchError(f"tcx trace did not print JSON ({exc}): {stdout[:200]!r}") from exc
    if report.get("schema") != "tcx.trace/1" or not report.get("compiles"):
        raise BenchError("tcx trace recorded no per-instruction trace")


def trace_capture_cost(runs: int) -> dict[str, Any]:
    """The per-instruction capture (`tcx trace`) against `tcx explain` without it, same program."""
    rel = str((PROGRAMS / "models" / "tiny_llama.py").relative_to(ROOT))
    tcx = Command(
        "tcx trace (eager, per-instruction capture)",
        [*tcx_argv(), "trace", rel, "--format", "json", "--limit", "100", "--backend", "eager"],
        fresh_cache=True,
        check=trace_check,
    )
    plain = Command(
        "tcx explain (eager)",
        [*tcx_argv(), "explain", rel, "--format", "json", "--backend", "eager"],
        fresh_cache=True,
        check=explain_check("eager"),
    )
    measure([tcx, plain], runs)
    return comparison(
        "per-instruction capture",
        "models/tiny_llama.py (2 layers): tcx trace --format json --limit 100 vs tcx explain --format json",
        tcx,
        plain,
        GOAL_TRACE_RATIO,
    )


def recording_overhead(runs: int, backend: str, workdir: Path) -> dict[str, Any]:
    program = PROGRAMS / "seed_f.py"
    rel = str(program.relative_to(ROOT))
    wrapper = workdir / "plain_with_backend.py"
    wrapper.write_text(WRAPPER, encoding="utf-8")
    tcx = Command(
        f"tcx explain --backend {backend}",
        [*tcx_argv(), "explain", rel, "--backend", backend, "--format", "json"],
        fresh_cache=True,
        check=explain_check(backend),
    )
    plain = Command(
        f"python program ({backend})",
        [PYTHON, str(wrapper), backend, rel],
        fresh_cache=True,
    )
    measure([tcx, plain], runs)
    result = comparison(
        "recording overhead",
        f"seed_f.py (4 calls fwd+bwd): tcx explain vs plain run, both backend={backend}",
        tcx,
        plain,
        GOAL_OVERHEAD_RATIO,
    )
    result["breakdown"] = overhead_breakdown(tcx, workdir, runs)
    return result


def overhead_breakdown(tcx: Command, workdir: Path, runs: int) -> dict[str, Any]:
    """Where tcx's extra time goes: one more run with --save, split into child and parent.

    The recording's `outcome` event holds the child's wall time (start-up, torch import,
    the program under the recorder hooks); the rest of the total is the parent: its own
    start-up, then loading, analysing and rendering the recording. `tcx show` of the saved
    recording times that last part alone.
    """
    saved = workdir / "overhead.tcx"
    total = run_once(replace(tcx, label=tcx.label + " --save", argv=[*tcx.argv, "--save", str(saved)]))
    child = outcome_wall(saved)
    show = Command("tcx show --format json", [*tcx_argv(), "show", str(saved), "--format", "json"])
    measure([show], max(runs, MIN_CHEAP_RUNS), quiet=True)
    return {
        "total_wall_s": round(total.wall_s, 4),
        "child_wall_s": child,
        "parent_wall_s": None if child is None else round(total.wall_s - child, 4),
        "show_wall_s": round(show.median_wall(), 4),
    }


def outcome_wall(recording: Path) -> float | None:
    """The child's wall time as the parent wrote it into the recording's `outcome` event."""
    try:
        lines = recording.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if '"outcome"' not in line:
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue
        if event.get("kind") == "outcome" and isinstance(event.get("wall_s"), (int, float)):
            return float(event["wall_s"])
    return None


def comparison(name: str, what: str, tcx: Command, plain: Command, goal: float) -> dict[str, Any]:
    ratio = tcx.median_wall() / plain.median_wall()
    return {
        "name": name,
        "what": what,
        "tcx": tcx.summary(),
        "reference": plain.summary(),
        "ratio_wall": round(ratio, 4),
        "ratio_cpu": round(tcx.median_cpu() / plain.median_cpu(), 4),
        "diff_wall_s": round(tcx.median_wall() - plain.median_wall(), 4),
        "goal_ratio_max": goal,
        "ok": ratio <= goal,
    }


def large_log(regenerate: bool, given: Path | None = None) -> Path:
    """A large TORCH_TRACE log (bench/make_large_log.py, inductor); made once, then reused; or
    `given` (`--log`, or TCX_BENCH_LOG for `make bench`): an existing log, used as it is."""
    if given is not None:
        if not given.is_file():
            raise BenchError(f"--log {given}: no such file")
        return given.resolve()  # commands run from the repository root
    logs = sorted(LARGE_LOG_DIR.glob("*.log")) if LARGE_LOG_DIR.is_dir() else []
    if logs and not regenerate:
        return logs[0]
    shutil.rmtree(LARGE_LOG_DIR, ignore_errors=True)
    print(
        "  writing the large log (>= 45 MB of Inductor compiles: half an hour on 2 loaded cores) ...",
        file=sys.stderr,
        flush=True,
    )
    env = {**base_env(), "TORCH_TRACE": str(LARGE_LOG_DIR), "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1"}
    subprocess.run(
        [PYTHON, str(ROOT / "bench" / "make_large_log.py"), "--backend", "inductor", "--min-mb", "45"],
        cwd=ROOT,
        env=env,
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return sorted(LARGE_LOG_DIR.glob("*.log"))[0]


def ingest_vs_tlparse(
    runs: int, regenerate: bool, workdir: Path, given: Path | None = None
) -> dict[str, Any] | None:
    """tcx reading a large TORCH_TRACE log to the explain summary vs tlparse on the same log."""
    tlparse = Path(PYTHON).parent / "tlparse"
    if not tlparse.exists():
        print("  tlparse is not installed: skipping ingest vs tlparse", file=sys.stderr)
        return None
    log = large_log(regenerate, given)
    tcx = Command("tcx explain LOG --format json", [*tcx_argv(), "explain", str(log), "--format", "json"])
    ref = Command(
        "tlparse LOG",
        [str(tlparse), str(log), "-o", str(workdir / "tlparse_out"), "--overwrite", "--no-browser"],
    )
    measure([tcx, ref], runs)
    size_mb = log.stat().st_size / 2**20
    return comparison(
        "ingest vs tlparse",
        f"{log.name} ({size_mb:.1f} MB): tcx explain vs tlparse",
        tcx,
        ref,
        GOAL_INGEST_RATIO,
    )


GOAL_CODEGEN_RENDER_S = 1.0


def codegen_render(runs: int, workdir: Path) -> dict[str, Any]:
    """`tcx codegen` rendering a saved recording of a 2-layer transformers model (no torch run)."""
    saved = workdir / "llama.tcx.gz"
    record = Command(
        "record tiny llama",
        [*tcx_argv(), "codegen", str(PROGRAMS / "models" / "tiny_llama.py"), "--format", "json",
         "--save", str(saved)],
    )  # fmt: skip
    run_once(record)  # untimed: the recording the render rows read
    text = Command("tcx codegen SAVED (text)", [*tcx_argv(), "codegen", str(saved), "--no-color"])
    as_json = Command(
        "tcx codegen SAVED --format json", [*tcx_argv(), "codegen", str(saved), "--format", "json"]
    )
    floor = Command("python -c pass", [PYTHON, "-c", "pass"])
    run_once(text)
    measure([text, as_json, floor], max(runs, MIN_CHEAP_RUNS), quiet=True)
    seconds = text.median_wall()
    return {
        "name": "codegen render, 2-layer llama (saved)",
        "tcx": text.summary(),
        "json": as_json.summary(),
        "reference": floor.summary(),
        "ratio_wall": round(seconds / floor.median_wall(), 4),
        "diff_wall_s": round(seconds - floor.median_wall(), 4),
        "recording_bytes": saved.stat().st_size,
        "goal_s_max": GOAL_CODEGEN_RENDER_S,
        "ok": seconds < GOAL_CODEGEN_RENDER_S and as_json.median_wall() < GOAL_CODEGEN_RENDER_S,
    }


def preview_overhead(runs: int) -> dict[str, Any] | None:
    """What `--target cuda:sm_90` adds to `tcx codegen` of the seed's f (fwd+bwd), and per graph."""
    try:
        import importlib.util

        if importlib.util.find_spec("triton") is None:
            print("  triton is not installed: skipping the CUDA preview row", file=sys.stderr)
            return None
    except ImportError:
        return None
    target = [str(PROGRAMS / "seed_f.py") + ":f", "--call", "128x32:grad,32x64:grad,64:grad"]
    per_graph: list[float] = []

    def keep_seconds(stdout: str) -> None:
        per_graph.extend(json.loads(stdout).get("preview_seconds") or [])

    preview = Command(
        "tcx codegen f --target cuda:sm_90",
        [*tcx_argv(), "codegen", *target, "--target", "cuda:sm_90", "--format", "json"],
        fresh_cache=True,
        check=keep_seconds,
    )
    plain = Command("tcx codegen f", [*tcx_argv(), "codegen", *target, "--format", "json"], fresh_cache=True)
    measure([preview, plain], runs)
    what = "tcx codegen of f (fwd+bwd), with vs without --target cuda:sm_90"
    res = comparison("CUDA preview added time", what, preview, plain, 10.0)
    res["per_graph_s"] = round(statistics.median(per_graph), 3) if per_graph else None
    res["graphs_per_run"] = len(per_graph) // max(runs, 1)
    return res


def help_startup(runs: int) -> dict[str, Any]:
    help_cmd = Command("tcx --help", [*tcx_argv(), "--help"])
    floor = Command("python -c pass", [PYTHON, "-c", "pass"])
    run_once(help_cmd)  # warm-up: page cache and .pyc files, untimed
    run_once(floor)
    measure([help_cmd, floor], max(runs, MIN_CHEAP_RUNS), quiet=True)
    seconds = help_cmd.median_wall()
    return {
        "name": "tcx --help",
        "tcx": help_cmd.summary(),
        "reference": floor.summary(),
        "ratio_wall": round(seconds / floor.median_wall(), 4),
        "diff_wall_s": round(seconds - floor.median_wall(), 4),
        "goal_s_max": GOAL_HELP_S,
        "ok": seconds < GOAL_HELP_S,
    }


def help_imports() -> dict[str, Any]:
    """Which heavy modules `tcx --help` and `tcx explain --help` import (torch must not be one)."""
    found: dict[str, list[str]] = {}
    for args in (["--help"], ["explain", "--help"]):
        proc = subprocess.run(
            [PYTHON, "-c", IMPORT_PROBE, *args],
            cwd=ROOT,
            env=base_env(),
            capture_output=True,
            text=True,
            check=False,
        )
        marker = [line for line in proc.stdout.splitlines() if line.startswith("@@")]
        if proc.returncode != 0 or not marker:
            tail = proc.stderr[-2000:]
            raise BenchError(f"import probe for tcx {' '.join(args)} failed:\n{tail}")
        found["tcx " + " ".join(args)] = json.loads(marker[-1][2:])
    imports_torch = any("torch" in mods for mods in found.values())
    return {"name": "tcx --help imports torch", "heavy_imports": found,
            "imports_torch": imports_torch, "ok": not imports_torch}  # fmt: skip


def fmt_s(seconds: float) -> str:
    return f"{seconds:.3f} s" if seconds < 1 else f"{seconds:.2f} s"


def status(ok: bool) -> str:
    return "ok" if ok else "MISSED"


def table(results: dict[str, Any]) -> str:
    """The one table: each comparison's two sides, their ratio, and the goal."""
    head = ("measurement", "tcx", "reference", "ratio", "cpu ratio", "goal", "status")
    rows: list[tuple[str, ...]] = [head]
    for res in (
        results.get("explain_vs_program_warm"),
        results.get("explain_vs_program_cold"),
        results.get("recording_overhead"),
        results.get("ingest_vs_tlparse"),
        results.get("trace_capture"),
        results.get("calls_capture"),
        results.get("cost_capture"),
        results.get("cache_vs_two_runs"),
        results.get("numerics_vs_program"),
    ):
        if res is None:
            continue
        rows.append(
            (
                res["name"],
                f"{fmt_s(res['tcx']['median_wall_s'])}",
                f"{fmt_s(res['reference']['median_wall_s'])}",
                f"{res['ratio_wall']:.2f} ({res['diff_wall_s']:+.2f} s)",
                f"{res['ratio_cpu']:.2f}",
                f"<= {res['goal_ratio_max']:.2f}",
                status(res["ok"]),
            )
        )
    cs = results.get("cost_step")
    if cs:
        rows.append(
            (
                cs["name"],
                f"{cs['tcx_step_ms']:.2f} ms",
                f"{cs['plain_step_ms']:.2f} ms (plain loop)",
                f"{cs['ratio']:.3f} (same steps {cs['same_steps_ratio']})",
                "",
                f"{1 / cs['goal_ratio']:.2f}-{cs['goal_ratio']:.2f}",
                status(cs["ok"]),
            )
        )
        shown = ", ".join(f"{i['low']:.2f}-{i['high']:.2f}x" for i in cs["speedup_intervals"]) or "none"
        rows.append(
            (
                "cost speedup interval",
                shown,
                f"{cs['plain_speedup']:.2f}x (plain eager/compiled)",
                "",
                "",
                "covers it",
                status(cs["speedup_ok"]),
            )
        )
    hp = results["help"]
    rows.append(
        (
            "tcx --help",
            fmt_s(hp["tcx"]["median_wall_s"]),
            f"{fmt_s(hp['reference']['median_wall_s'])} (python -c pass)",
            f"{hp['ratio_wall']:.2f} ({hp['diff_wall_s']:+.3f} s)",
            "",
            f"< {hp['goal_s_max']:.2f} s",
            status(hp["ok"]),
        )
    )
    im = results["help_imports"]
    rows.append(
        (
            "tcx --help imports torch",
            "yes" if im["imports_torch"] else "no",
            "",
            "",
            "",
            "no",
            status(im["ok"]),
        )
    )
    cg = results.get("codegen_render")
    if cg:
        rows.append(
            (
                cg["name"],
                f"{fmt_s(cg['tcx']['median_wall_s'])} (json {fmt_s(cg['json']['median_wall_s'])})",
                f"{fmt_s(cg['reference']['median_wall_s'])} (python -c pass)",
                f"{cg['ratio_wall']:.2f} ({cg['diff_wall_s']:+.3f} s)",
                "",
                f"< {cg['goal_s_max']:.2f} s",
                status(cg["ok"]),
            )
        )
    pv = results.get("preview_overhead")
    if pv:
        rows.append(
            (
                pv["name"],
                f"{fmt_s(pv['tcx']['median_wall_s'])}",
                f"{fmt_s(pv['reference']['median_wall_s'])} (no preview)",
                f"{pv['ratio_wall']:.2f} ({pv['diff_wall_s']:+.2f} s)",
                f"{pv['ratio_cpu']:.2f}",
                f"{pv['per_graph_s']} s/graph" if pv.get("per_graph_s") is not None else "",
                "report",
            )
        )
    for ts in results.get("test_suite") or []:
        rows.append(
            (
                ts["name"],
                f"{fmt_s(ts['wall_s'])} (median of {ts['runs']})",
                f"{fmt_s(ts['goal_s_max'])} (goal)",
                f"{ts['wall_s'] / ts['goal_s_max']:.2f}",
                "",
                f"<= {ts['goal_s_max']:.0f} s",
                status(ts["ok"]),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def footnotes(results: dict[str, Any]) -> str:
    notes = []
    for key in (
        "explain_vs_program_warm",
        "explain_vs_program_cold",
        "recording_overhead",
        "ingest_vs_tlparse",
        "trace_capture",
        "calls_capture",
        "cost_capture",
        "cache_vs_two_runs",
        "numerics_vs_program",
    ):
        res = results.get(key)
        if res:
            notes.append(
                f"{res['name']}: {res['what']}\n"
                f"    tcx       {res['tcx']['label']}: {spread(res['tcx'])}\n"
                f"    reference {res['reference']['label']}: {spread(res['reference'])}"
            )
    cs = results.get("cost_step")
    if cs:
        notes.append(
            f"{cs['name']}: {cs['what']}\n"
            f"    plain runs {cs['plain_step_ms_runs']} ms, tcx cost runs {cs['tcx_step_ms_runs']} ms; "
            f"the same steps on the program's own clock in tcx's run: ratio {cs['same_steps_ratio']}\n"
            f"    plain: compiled {cs['plain_step_ms']} ms, eager (--no-compile) "
            f"{cs['plain_eager_step_ms']} ms per train step: speedup {cs['plain_speedup']}x; tcx's notes: "
            + "; ".join(str(r["speedup_note"] or "speedup shown") for r in cs["tcx_runs"])
        )
    bd = (results.get("recording_overhead") or {}).get("breakdown")
    if bd and bd["child_wall_s"] is not None:
        notes.append(
            f"    breakdown (one extra run with --save): {bd['total_wall_s']:.2f} s total = "
            f"child {bd['child_wall_s']:.2f} s + parent {bd['parent_wall_s']:.2f} s; "
            f"`tcx show` of that recording alone: {bd['show_wall_s']:.2f} s"
        )
    env = results["environment"]
    notes.append(
        f"median of {results['runs']} run(s) (start-up rows: {results['help']['runs']}); "
        f"wall clock, cpu = user+sys of the process tree; torch {env['torch']}, "
        f"{env['cpus']} cpu(s), load avg {env['loadavg_start']} -> {env['loadavg_end']}"
    )
    return "\n".join(notes)


def spread(side: dict[str, Any]) -> str:
    walls = sorted(s["wall_s"] for s in side["samples"])
    return "wall " + ", ".join(f"{w:.2f}" for w in walls) + " s"


def torch_version() -> str:
    proc = subprocess.run(
        [PYTHON, "-c", "import torch; print(torch.__version__)"],
        capture_output=True,
        text=True,
        env=base_env(),
        check=False,
    )
    return proc.stdout.strip() or "unavailable"


def git_commit() -> str | None:
    try:
        proc = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
    except OSError:
        return None
    return proc.stdout.strip() or None


def loadavg() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def suite_time(runs: int) -> list[dict[str, Any]]:
    """`make test` and `make test-fast` as a developer runs them, each `runs` times (median), each run on
    a cold session (every shared recording made anew; the session's Inductor cache starts empty)."""
    rows = []
    for target, goal in (("test", GOAL_TEST_SUITE_S), ("test-fast", GOAL_TEST_FAST_S)):
        cmd = Command(f"make {target}", ["make", "-s", target])
        for _ in range(runs):
            print(f"  make {target} ...", file=sys.stderr, flush=True)
            cmd.samples.append(run_once(cmd))
        rows.append(
            {
                "name": f"test suite (make {target})",
                "runs": runs,
                "wall_s": round(cmd.median_wall(), 1),
                "cpu_s": round(cmd.median_cpu(), 1),
                "samples": [asdict(s) for s in cmd.samples],
                "goal_s_max": goal,
                "ok": cmd.median_wall() <= goal,
            }
        )
    return rows


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=textwrap.dedent(__doc__ or "").split("\n\n")[0],
    )
    parser.add_argument("--runs", type=int, default=3, help="runs per side; the median is kept")
    parser.add_argument("--quick", action="store_true", help="one run per side (same as --runs 1)")
    parser.add_argument("--backend", default="aot_eager", help="backend for the overhead row")
    parser.add_argument(
        "--skip-inductor",
        action="store_true",
        help="skip 'explain vs program' (its plain side compiles C++ with Inductor: slow)",
    )
    parser.add_argument("--skip-tests", action="store_true", help="skip timing the test suite")
    parser.add_argument(
        "--skip-advice",
        action="store_true",
        help="skip the advice sweep (bench/advice.py: tcx fix over the corpus)",
    )
    parser.add_argument("--regen-log", action="store_true", help="write the large TORCH_TRACE log again")
    parser.add_argument(
        "--log",
        type=Path,
        default=Path(os.environ["TCX_BENCH_LOG"]) if os.environ.get("TCX_BENCH_LOG") else None,
        help="an existing large TORCH_TRACE log for the ingest and big-run rows, instead of writing one "
        "(default: $TCX_BENCH_LOG); the 1 GB log is made from it",
    )
    parser.add_argument("--skip-big", action="store_true", help="skip the big-run rows (bench/big_runs.py)")
    parser.add_argument("--only-big", action="store_true", help="run only the big-run rows")
    parser.add_argument(
        "--only-suite", action="store_true", help="run only the test-suite rows (make test, make test-fast)"
    )
    parser.add_argument(
        "--against",
        metavar="REV",
        help="the big-run rows of the tcx at git revision REV too, interleaved (before/after)",
    )
    parser.add_argument("--output", type=Path, default=RESULTS / "latest.json", help="where the JSON goes")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs = 1
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    return args


def recompiles_check(stdout: str) -> None:
    try:
        report = json.loads(stdout)
    except json.JSONDecodeError as exc:
        raise BenchError(f"tcx recompiles did not print JSON ({exc}): {stdout[:200]!r}") from exc
    if report.get("call_count") != 3020:
        raise BenchError(f"tcx recompiles counted {report.get('call_count')} calls, expected 3020")


def calls_capture_cost(runs: int) -> dict[str, Any]:
    """The per-call capture (`tcx recompiles`) against `tcx explain`, on 3020 calls of compiled functions."""
    rel = str((PROGRAMS / "recompiles" / "hot_loop.py").relative_to(ROOT))
    tcx = Command(
        "tcx recompiles (per-call capture)",
        [*tcx_argv(), "recompiles", rel, "--format", "json", "--backend", "eager"],
        check=recompiles_check,
    )
    plain = Command(
        "tcx explain",
        [*tcx_argv(), "explain", rel, "--format", "json", "--backend", "eager"],
        check=explain_check("eager"),
    )
    measure([tcx, plain], runs)
    return comparison(
        "per-call capture",
        "recompiles/hot_loop.py (3020 calls): tcx recompiles vs tcx explain",
        tcx,
        plain,
        GOAL_CALLS_RATIO,
    )


def cost_check(stdout: str) -> None:
    """`tcx cost --format json` measured steady steps and profiled some."""
    try:
        report = json.loads(stdout)
    except json.JSONDecodeError as exc:
        raise BenchError(f"tcx cost did not print JSON ({exc}): {stdout[:200]!r}") from exc
    if not report.get("steady_steps") or not report.get("breakdown"):
        raise BenchError(f"tcx cost measured no steady step: {report.get('notes')}")


def own_train_steps(times_file: Path) -> dict[int, float]:
    """The program's own train step times (index of the step's forward call -> ms, time.perf_counter,
    fixtures/programs/cost/nano_train.py), its first two steps left out (compile, warm-up)."""
    line = json.loads(times_file.read_text().splitlines()[-1])
    steps = [s for s in line["steps"] if s["kind"] == "train"]
    return {s["index"]: s["seconds"] * 1000 for s in steps[2:]}


def tcx_timed_steps(doc: dict[str, Any]) -> dict[int, float]:
    """The train steps tcx timed (index -> ms) whose program-side timing holds no profiler work of tcx's
    (tcx leaves that work out of its steps; the program's own clock cannot)."""
    calls = {c["index"]: c for f in doc["functions"] for c in f["call_times"]}
    train = next(g for g in doc["steps"] if g["mode"] == "grad")
    return {
        s["index"]: s["ms"]
        for s in train["step_times"]
        if s["run"] == 0
        and not (s["warmup"] or s["profiled"])
        and not (calls.get(s["index"], {}).get("profiler_ns") or calls.get(s["index"], {}).get("profiled"))
    }


def cost_vs_plain_loop(runs: int, backend: str) -> dict[str, Any]:
    """`tcx cost` on the nanoGPT-style loop: its train step time against the same program's own timed
    loop run plainly (interleaved with it, in alternating order), and against the program's own clock of
    the same steps in tcx's run; its speedup interval against a plain eager-vs-compiled comparison."""
    rel = str((PROGRAMS / "cost" / "nano_train.py").relative_to(ROOT))
    args = ["--backend", backend] if backend != "inductor" else []
    plain: list[float] = []
    eager: list[float] = []
    tcx_runs: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="tcx-bench-cost-") as tmp:
        env = {**base_env(), "TORCHINDUCTOR_CACHE_DIR": str(Path(tmp) / "cache")}
        times = Path(tmp) / "times.jsonl"

        def plain_run(argv: list[str]) -> float:
            subprocess.run([*argv, "--times", str(times)], cwd=ROOT, env=env, check=True, capture_output=True)
            steps = own_train_steps(times)
            times.unlink()
            return statistics.median(steps.values())

        def tcx_run() -> dict[str, Any]:
            argv = [*tcx_argv(), "cost", rel, "--budget", "0", "--format", "json", "--no-save", "--", *args]
            argv += ["--times", str(times)]
            proc = subprocess.run(argv, cwd=ROOT, env=env, capture_output=True, text=True)
            if proc.returncode != 0:
                raise BenchError(f"tcx cost {rel}: exit code {proc.returncode}\n{proc.stderr[-2000:]}")
            doc = json.loads(proc.stdout)
            own = own_train_steps(times)  # the last line: the recorded run (the eager run wrote first)
            times.unlink()
            ours = tcx_timed_steps(doc)
            same = [i for i in ours if i in own]
            train = next(g for g in doc["steps"] if g["mode"] == "grad")
            return {
                "step_ms": train["step_ms_interval"]["median"] if train["step_ms_interval"] else None,
                "steps": train["timed_steps"],
                "same_steps_tcx_ms": statistics.median(ours[i] for i in same) if same else None,
                "same_steps_program_ms": statistics.median(own[i] for i in same) if same else None,
                "speedup_interval": train["speedup_interval"],
                "speedup_note": train["speedup_note"],
            }

        for i in range(runs):
            order = ("plain", "eager", "tcx") if i % 2 == 0 else ("tcx", "eager", "plain")
            for what in order:
                if what == "plain":
                    plain.append(plain_run([PYTHON, rel, *args]))
                elif what == "eager":
                    eager.append(plain_run([PYTHON, rel, "--no-compile"]))
                else:
                    tcx_runs.append(tcx_run())
            print(
                f"  run {i + 1}/{runs}  plain {plain[-1]:.2f} ms, eager {eager[-1]:.2f} ms, tcx cost "
                f"{tcx_runs[-1]['step_ms']} ms per train step",
                file=sys.stderr,
                flush=True,
            )
    step = statistics.median(r["step_ms"] for r in tcx_runs if r["step_ms"] is not None)
    plain_step, plain_eager = statistics.median(plain), statistics.median(eager)
    ratio = step / plain_step
    same = [r for r in tcx_runs if r["same_steps_tcx_ms"] and r["same_steps_program_ms"]]
    same_ratio = (
        statistics.median(r["same_steps_tcx_ms"] / r["same_steps_program_ms"] for r in same) if same else None
    )
    intervals = [r["speedup_interval"] for r in tcx_runs if r["speedup_interval"]]
    plain_speedup = plain_eager / plain_step
    covered = [i["low"] <= plain_speedup <= i["high"] for i in intervals]
    return {
        "name": "cost step vs plain loop",
        "what": f"cost/nano_train.py ({backend}): tcx cost's train step (median of {runs} runs' medians) vs "
        f"the program's own perf_counter loop run plainly ({runs} runs, interleaved)",
        "backend": backend,
        "tcx_step_ms": round(step, 3),
        "plain_step_ms": round(plain_step, 3),
        "plain_step_ms_runs": [round(x, 3) for x in plain],
        "tcx_step_ms_runs": [r["step_ms"] for r in tcx_runs],
        "ratio": round(ratio, 4),
        "same_steps_ratio": None if same_ratio is None else round(same_ratio, 4),
        "goal_ratio": GOAL_STEP_RATIO,
        "ok": 1 / GOAL_STEP_RATIO <= ratio <= GOAL_STEP_RATIO,
        "plain_eager_step_ms": round(plain_eager, 3),
        "plain_speedup": round(plain_speedup, 4),
        "speedup_intervals": intervals,
        "speedup_covered": covered,
        "speedup_ok": bool(covered) and all(covered),
        "tcx_runs": tcx_runs,
    }


def cost_capture_cost(runs: int) -> dict[str, Any]:
    """The cost run (`tcx cost --no-eager`: every call timed, 5 steady calls profiled) against `tcx explain`
    (the recording alone), on 3020 calls; `tcx cost` with its second, eager run is timed alongside."""
    rel = str((PROGRAMS / "recompiles" / "hot_loop.py").relative_to(ROOT))
    common = ["--format", "json", "--backend", "eager"]
    tcx = Command("tcx cost --no-eager", [*tcx_argv(), "cost", rel, *common, "--no-eager"], check=cost_check)
    plain = Command("tcx explain", [*tcx_argv(), "explain", rel, *common], check=explain_check("eager"))
    full = Command("tcx cost (with its eager run)", [*tcx_argv(), "cost", rel, *common], check=cost_check)
    measure([tcx, plain, full], runs)
    res = comparison(
        "cost capture",
        "recompiles/hot_loop.py (3020 calls): tcx cost --no-eager vs tcx explain (the eager run is a "
        f"second run of the program: tcx cost with it took {full.median_wall():.2f} s)",
        tcx,
        plain,
        GOAL_COST_RATIO,
    )
    res["with_eager_run"] = full.summary()
    return res


def cache_check(stdout: str) -> None:
    """`tcx cache --format json` ran cold then warm, and the warm run hit every lookup."""
    try:
        report = json.loads(stdout)
    except json.JSONDecodeError as exc:
        raise BenchError(f"tcx cache did not print JSON ({exc}): {stdout[:200]!r}") from exc
    if [r["label"] for r in report.get("runs", [])] != ["cold", "warm"]:
        raise BenchError("tcx cache did not run the program cold, then warm")
    if not report.get("cache_lookup_count") or report.get("cache_miss_count"):
        raise BenchError(f"tcx cache: the warm run did not hit every lookup: {report.get('runs')}")


def cache_vs_two_runs(runs: int) -> dict[str, Any]:
    """`tcx cache PROGRAM` (cold + warm, recorded) against running the program twice."""
    rel = str((PROGRAMS / "cache" / "tiny.py").relative_to(ROOT))
    argv = [*tcx_argv(), "cache", rel, "--format", "json"]
    tcx = Command("tcx cache (cold + warm)", argv, check=cache_check)
    plain = Command(
        "python program twice (shared cache dir)",
        ["sh", "-c", f'"{PYTHON}" {rel} && "{PYTHON}" {rel}'],
        fresh_cache=True,
    )
    measure([tcx, plain], runs)
    return comparison(
        "cache vs program twice",
        "cache/tiny.py: tcx cache vs two plain runs sharing a fresh TORCHINDUCTOR_CACHE_DIR",
        tcx,
        plain,
        GOAL_CACHE_RATIO,
    )


def numerics_check(stdout: str) -> None:
    """`tcx numerics --format json` compared every call, gradient and parameter, and found them within."""
    try:
        report = json.loads(stdout)
    except json.JSONDecodeError as exc:
        raise BenchError(f"tcx numerics did not print JSON ({exc}): {stdout[:200]!r}") from exc
    if report.get("verdict") != "within_tolerance" or not report.get("calls") or not report.get("gradients"):
        raise BenchError(f"tcx numerics: {report.get('verdict')}, notes {report.get('notes')}")


def numerics_vs_program(runs: int, workdir: Path) -> dict[str, Any]:
    """`tcx numerics PROGRAM --no-localize` (the program eager with its float64 twins, then compiled; each
    compiled call, gradient and parameter compared, nothing localized) against the program's own run,
    both on one Inductor cache warmed once."""
    rel = str((PROGRAMS / "numerics" / "batchnorm_train.py").relative_to(ROOT))
    env = {"TORCHINDUCTOR_CACHE_DIR": str(workdir / "warm-cache")}
    run_once(Command("warm the cache", [PYTHON, rel], env=env))
    argv = [*tcx_argv(), "numerics", rel, "--no-localize", "--format", "json", "--no-save"]
    tcx = Command("tcx numerics --no-localize", argv, env=env, check=numerics_check)
    plain = Command("python program (warm)", [PYTHON, rel], env=env)
    measure([tcx, plain], runs)
    return comparison(
        "numerics vs program",
        "numerics/batchnorm_train.py (3 training steps, Inductor): tcx numerics --no-localize (an eager run "
        "with float64 twins, then the compiled run) vs the program's own run, warm caches",
        tcx,
        plain,
        GOAL_NUMERICS_RATIO,
    )


def run_big(args: argparse.Namespace) -> dict[str, Any] | None:
    """The real-size rows (bench/big_runs.py): every view, the HTML report, 1 GB, 64 ranks."""
    log = large_log(args.regen_log, args.log)
    env = base_env()
    say = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    before = earlier_tcx(args.against) if args.against else None
    return big_runs.big_runs(tcx_argv(), log, args.runs, env, say, before)


def earlier_tcx(rev: str) -> big_runs.Before:
    """The tcx of git revision `rev`, run from a worktree under bench/results/ (with this
    interpreter and its torch) through a tree of links laid out as the installed package."""
    commit = subprocess.run(
        ["git", "rev-parse", "--short", rev], cwd=ROOT, capture_output=True, text=True, check=False
    )
    if commit.returncode != 0:
        raise BenchError(f"--against {rev}: not a git revision here ({commit.stderr.strip()})")
    short = commit.stdout.strip()
    tree = RESULTS / "against" / short
    if not tree.is_dir():
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), short], cwd=ROOT, check=True)
    layout = RESULTS / "against" / f"{short}-layout"
    shutil.rmtree(layout, ignore_errors=True)
    (layout / "tcx").mkdir(parents=True)
    for module in (tree / "tcx").glob("*.py"):
        (layout / "tcx" / module.name).symlink_to(module)
    for folder in ("cli", "core", "renderers", "tui"):
        (layout / "tcx" / folder).symlink_to(tree / folder)
    return big_runs.Before(short, ["env", f"PYTHONPATH={layout}", PYTHON, "-P", "-m", "tcx"])  # -P: not ./tcx


def big_runs_only(args: argparse.Namespace, results: dict[str, Any], started: float) -> int:
    """`--only-big`: the real-size rows alone, in their own table and results file."""
    try:
        results["environment"]["torch"] = torch_version()
        results["big_runs"] = run_big(args)
    except (BenchError, RuntimeError) as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    results["environment"]["loadavg_end"] = loadavg()
    results["elapsed_s"] = round(time.perf_counter() - started, 1)
    if results["big_runs"]:
        print()
        print(big_runs.table(results["big_runs"]))
    print(
        f"\nwall clock medians of {args.runs} run(s); {results['environment']['cpus']} cpu(s), "
        f"load avg {results['environment']['loadavg_start']} -> {results['environment']['loadavg_end']}"
    )
    out = args.output if args.output != RESULTS / "latest.json" else RESULTS / "big_runs.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out} ({results['elapsed_s']} s)")
    return 0


def suite_only(args: argparse.Namespace, results: dict[str, Any], started: float) -> int:
    """`--only-suite`: `make test` and `make test-fast`, `--runs` times each, in their own results file."""
    try:
        results["test_suite"] = suite_time(args.runs)
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    results["environment"]["loadavg_end"] = loadavg()
    results["elapsed_s"] = round(time.perf_counter() - started, 1)
    for row in results["test_suite"]:
        walls = ", ".join(f"{s['wall_s']:.0f}" for s in row["samples"])
        print(
            f"{row['name']}: {row['wall_s']:.0f} s median of {row['runs']} ({walls}), "
            f"cpu {row['cpu_s']:.0f} s, goal <= {row['goal_s_max']:.0f} s: {status(row['ok'])}"
        )
    out = args.output if args.output != RESULTS / "latest.json" else RESULTS / "suite.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out} ({results['elapsed_s']} s)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    started = time.perf_counter()
    results: dict[str, Any] = {
        "schema": "tcx.bench/1",
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "runs": args.runs,
        "environment": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "git_commit": git_commit(),
            "loadavg_start": loadavg(),
        },
    }
    # Untimed: tcx's own modules compiled to bytecode, as a pip install leaves them; otherwise,
    # with PYTHONDONTWRITEBYTECODE set, every timed run would compile them again.
    for package in ("tcx", "cli", "core", "renderers", "tui"):
        compileall.compile_dir(str(ROOT / package), quiet=1)
    if args.only_big:
        return big_runs_only(args, results, started)
    if args.only_suite:
        return suite_only(args, results, started)
    try:
        # Untimed: brings torch into the page cache so the first timed run is not penalised.
        results["environment"]["torch"] = torch_version()
        print("tcx --help start-up ...", file=sys.stderr, flush=True)
        results["help"] = help_startup(args.runs)
        results["help"]["runs"] = max(args.runs, MIN_CHEAP_RUNS)
        results["help_imports"] = help_imports()
        if not args.skip_inductor:
            print("explain vs program (warm, cold) ...", file=sys.stderr, flush=True)
            with tempfile.TemporaryDirectory(prefix="tcx-bench-") as tmp:
                warm, cold = explain_vs_program(args.runs, Path(tmp))
            results["explain_vs_program_warm"], results["explain_vs_program_cold"] = warm, cold
        print(f"recording overhead ({args.backend}) ...", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="tcx-bench-") as tmp:
            results["recording_overhead"] = recording_overhead(args.runs, args.backend, Path(tmp))
        print("codegen render from a saved recording ...", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="tcx-bench-") as tmp:
            results["codegen_render"] = codegen_render(args.runs, Path(tmp))
        if not args.skip_inductor:
            print("CUDA preview added time ...", file=sys.stderr, flush=True)
            results["preview_overhead"] = preview_overhead(args.runs)
        print("ingest vs tlparse ...", file=sys.stderr, flush=True)
        with tempfile.TemporaryDirectory(prefix="tcx-bench-") as tmp:
            results["ingest_vs_tlparse"] = ingest_vs_tlparse(args.runs, args.regen_log, Path(tmp), args.log)
        print("per-instruction capture (tcx trace vs tcx explain) ...", file=sys.stderr, flush=True)
        results["trace_capture"] = trace_capture_cost(args.runs)
        print("per-call capture (tcx recompiles vs tcx explain) ...", file=sys.stderr, flush=True)
        results["calls_capture"] = calls_capture_cost(args.runs)
        print("cost capture (tcx cost vs tcx explain) ...", file=sys.stderr, flush=True)
        results["cost_capture"] = cost_capture_cost(args.runs)
        backend = "aot_eager" if args.skip_inductor else "inductor"
        print(f"cost step vs a plain timed loop (nano_train, {backend}) ...", file=sys.stderr, flush=True)
        results["cost_step"] = cost_vs_plain_loop(args.runs, backend)
        if not args.skip_inductor:
            print("warm start (tcx cache vs the program twice) ...", file=sys.stderr, flush=True)
            results["cache_vs_two_runs"] = cache_vs_two_runs(args.runs)
            print("numerics (tcx numerics --no-localize vs the program) ...", file=sys.stderr, flush=True)
            with tempfile.TemporaryDirectory(prefix="tcx-bench-") as tmp:
                results["numerics_vs_program"] = numerics_vs_program(args.runs, Path(tmp))
        if not args.skip_big:
            results["big_runs"] = run_big(args)
        if not args.skip_advice:
            results["advice"] = advice.sweep(advice.CORPUS)
        if not args.skip_tests:
            print("test suite (make test) ...", file=sys.stderr, flush=True)
            results["test_suite"] = suite_time(args.runs)
    except BenchError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 1
    results["environment"]["loadavg_end"] = loadavg()
    results["elapsed_s"] = round(time.perf_counter() - started, 1)
    print()
    print(table(results))
    if results.get("big_runs"):
        print()
        print(big_runs.table(results["big_runs"]))
    if results.get("advice"):
        print()
        print(advice.table(results["advice"]))
    print()
    print(footnotes(results))
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(f"\nwrote {args.output} ({results['elapsed_s']} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
