"""Every fixture program, run as a user runs it, against torch's own log of a plain run.

For each program under fixtures/programs/ that runs on the CPU: `python PROG` with TORCH_TRACE set
(no tcx anywhere), then `tcx explain PROG --format json --save R.tcx` with no options (the
program's own backend and caches: one shared TORCHINDUCTOR_CACHE_DIR, so tcx's run is the
program's second run), then `recompiles`, `guards` and `check` from the saved recording. The
counts are compared with torch's log read by a tiny parser of this script's own (not tcx's), and
`check` must pass exactly when a check of the log passes. Writes a table; exits 1 on a mismatch.

    python bench/program_counts.py [--out bench/program_counts.txt] [PROGRAM ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "fixtures" / "programs"
# Not runnable as a plain CPU program: GPU, torchrun, failing on purpose, helpers, export-only.
LEFT_OUT = (
    *("gpu/", "distributed/", "broken/", "children/", "pkg_example/", "site-packages/", "export/"),
    "api_blocks.py",  # functions for tests/test_api.py: run as a script it compiles nothing
)
LINE = re.compile(r"^[VIWEF]\d{4} [\d:.]+ +\d+ [^\]]*\] (\{.*\})\s*$")
CONTEXT = {"frame_id", "frame_compile_id", "attempt", "has_payload", "stack", "compiled_autograd_id", "rank"}


def torch_counts(trace: Path) -> dict[str, int]:
    counts = {"graph_count": 0, "graph_break_count": 0, "recompile_count": 0, "guard_sets": 0}
    compiles = set()
    for log in sorted(trace.glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            m = LINE.match(line)
            if not m:
                continue
            md = json.loads(m.group(1))
            name = next((k for k in md if k not in CONTEXT), "")
            # compile ids as the JSON contract counts them: a refused compile has metrics only
            if name in ("dynamo_start", "compilation_metrics") and md.get("frame_id") is not None:
                compiles.add((md["frame_id"], md.get("frame_compile_id")))
            counts["graph_count"] += name == "dynamo_output_graph"
            counts["guard_sets"] += name == "dynamo_cpp_guards_str"
            artifact = md["artifact"]["name"] if name == "artifact" else ""
            counts["recompile_count"] += artifact == "recompile_reasons"
            counts["graph_break_count"] += artifact == "dynamo_graph_break_reason"
    counts["compile_count"] = len(compiles)
    return counts


def tcx(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tcx", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800
    )


def compare(program: Path, work: Path, env: dict[str, str]) -> tuple[list[str], str]:
    trace = work / "trace"
    plain = subprocess.run(
        [sys.executable, str(program)],
        cwd=ROOT,
        env={**env, "TORCH_TRACE": str(trace)},
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if plain.returncode != 0:
        return [f"the plain run failed (exit {plain.returncode})"], ""
    want = torch_counts(trace)
    save = work / "run.tcx"
    live = tcx("explain", str(program), "--format", "json", "--save", str(save), "--no-save", env=env)
    if live.returncode != 0:
        return [f"tcx explain exited {live.returncode}: {live.stderr.strip()[-300:]}"], ""
    doc = json.loads(live.stdout)
    rec = json.loads(tcx("recompiles", str(save), "--format", "json", env=env).stdout)
    guards = json.loads(tcx("guards", str(save), "--format", "json", env=env).stdout)
    got = {k: doc[k] for k in ("graph_count", "graph_break_count", "recompile_count", "compile_count")}
    got["recompiles view"] = rec["recompile_count"]
    got["guard_sets"] = len(guards["entries"])
    wrong = [
        f"{k}: tcx {got[k]} != torch {want[k if k != 'recompiles view' else 'recompile_count']}"
        for k in got
        if got[k] != want[k if k != "recompiles view" else "recompile_count"]
    ]
    for option, key in (("--max-graph-breaks", "graph_break_count"), ("--max-recompiles", "recompile_count")):
        for budget in {want[key], max(want[key] - 1, 0)}:
            on_run = tcx("check", str(save), option, str(budget), env=env).returncode
            on_log = tcx("check", str(trace), option, str(budget), env=env).returncode
            if on_run != on_log:
                wrong.append(f"check {option} {budget}: recording exit {on_run}, log exit {on_log}")
    row = " ".join(
        f"{want[k]:>3}" for k in ("graph_count", "graph_break_count", "recompile_count", "compile_count")
    )
    return wrong, f"{row} {want['guard_sets']:>3}   eager-only: {doc['backend']['name'] == 'eager'}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("programs", nargs="*")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "program_counts.txt")
    args = parser.parse_args(argv)
    programs = [Path(p).resolve() for p in args.programs] or [
        p
        for p in sorted(PROGRAMS.rglob("*.py"))
        if not str(p.relative_to(PROGRAMS)).startswith(LEFT_OUT) and "__" not in p.name
    ]
    lines = ["program                                   graphs breaks recompiles compiles guard-sets  result"]
    failed = 0
    with tempfile.TemporaryDirectory(prefix="tcx-counts-") as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH_", "TCX_"))}
        env.update(TORCHINDUCTOR_CACHE_DIR=str(Path(tmp) / "cache"), NO_COLOR="1")
        for i, program in enumerate(programs):
            work = Path(tmp) / str(i)
            work.mkdir()
            wrong, row = compare(program, work, env)
            failed += bool(wrong)
            name = str(program.relative_to(PROGRAMS))
            lines.append(
                f"{name:<42}{row}  {'same as torch' if not wrong else 'DIFFERS: ' + '; '.join(wrong)}"
            )
            print(lines[-1], flush=True)
    text = (
        "\n".join(lines)
        + f"\n\n{len(programs) - failed} of {len(programs)} programs: tcx equals torch's own log\n"
    )
    args.out.write_text(text)
    print(text.splitlines()[-1])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
