"""Run on a machine with an NVIDIA GPU: `tcx cost`'s per-kernel times and bandwidth against torch.profiler.

    python bench/gpu_cost.py OUT_DIR [pointwise softmax matmul tiny_llama nano_train]

For each workload (fixtures/programs/cost/gpu/, and the nanoGPT-style training loop
fixtures/programs/cost/nano_train.py on cuda) it runs `tcx cost PROGRAM --format json` with
TCX_COST_PROFILER_EXPORT set, so the recorder also writes torch.profiler's OWN output for every step
it profiled (its Chrome trace and its key_averages table) — the same run, the same steps. Then:

- every device kernel name of those steps: tcx's device time per step (the `device_kernels` of every
  breakdown row, summed by name: Triton kernels, cuBLAS/cuDNN kernels of extern calls, kernels a
  CUDA-graph replay ran) against the profiler's (its trace's `kernel` and `gpu_memset` events of that
  name, summed per step and averaged over the same steps, read here with json alone); within 10% passes;
- each row's device time and launch cost apart (`own_ms_per_step`, `launch_ms_per_step`), the device's
  busy share of a step and whether tcx calls the run launch-bound (nano_train: a tiny model on a big
  GPU), the matmul's extern row (mode="max-autotune" replays it from a CUDA graph) with its FLOP rate;
- the bytes and FLOPs tcx counts against the figures counted by hand from the shapes: the pointwise
  kernel reads two and writes one 2**28 float32 tensor (3 * 2**28 * 4 bytes), the softmax reads and
  writes one 8192x8192 float32 matrix (2 * 8192**2 * 4), the matmul does 2 * 8192**3 FLOPs; and the
  bandwidth / FLOP rate those give with the profiler's kernel time, against tcx's;
- the tiny Llama is ranked end to end: its `tcx cost` text (docs/cost.md's GPU example), its Chrome trace.

Needs torch with CUDA, triton, transformers (for the Llama), and tcx importable (`pip install -e .`);
no network. Writes at most 5 files into OUT_DIR (the device tool brings back 8): gpu_cost.json,
gpu_cost.txt, cost_tiny_llama.txt, trace_tiny_llama.json, runs.tar.gz (each run's recording and the
profiler's exports, when they fit in 16 MiB).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "fixtures" / "programs" / "cost" / "gpu"
WORKLOADS = ("pointwise", "softmax", "matmul", "tiny_llama", "nano_train")
FILES = {"tiny_llama": "llama.py"}  # (not tiny_llama.py: it imports fixtures/programs/models/tiny_llama.py)
PROGRAM_ARGS = {"nano_train": ["--", "--device", "cuda"]}
PATHS = {"nano_train": ROOT / "fixtures" / "programs" / "cost" / "nano_train.py"}
TOLERANCE = 0.10
MAX_TAR = 16 * 1024 * 1024
# What each kernel moves or computes per call, counted by hand from the program's shapes.
HAND_COUNTED: dict[str, dict[str, Any]] = {
    "pointwise": {"kernel": "triton_poi_fused_add_mul_relu", "bytes": 3 * 2**28 * 4},
    "softmax": {"kernel": "_softmax", "bytes": 2 * 8192 * 8192 * 4},
    "matmul": {"kernel": None, "flops": 2 * 8192**3},
}


def tcx_cost(name: str, work: Path, timeout: float) -> dict[str, Any]:
    """`tcx cost` of one workload, with the profiler's own output of every profiled call."""
    folder = work / name
    folder.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "TCX_COST_PROFILER_EXPORT": str(folder / "profiler"), "NO_COLOR": "1"}
    program = PATHS.get(name) or PROGRAMS / FILES.get(name, f"{name}.py")
    argv = [sys.executable, "-m", "tcx", "cost", str(program), "--no-save"]
    argv += ["--save", str(folder / "run.tcx"), "--timeout", str(timeout), "--budget", "0"]
    started = time.monotonic()
    proc = subprocess.run(
        [*argv, "--format", "json", "--trace", str(folder / "trace.json"), *PROGRAM_ARGS.get(name, [])],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout * 3 + 120,
    )
    seconds = round(time.monotonic() - started, 1)
    out: dict[str, Any] = {"name": name, "exit_code": proc.returncode, "seconds": seconds}
    try:
        out["doc"] = json.loads(proc.stdout)
    except ValueError:
        out["error"] = (proc.stderr or proc.stdout)[-3000:]
        return out
    text = subprocess.run(  # the same recording as people read it (no new run)
        [sys.executable, "-m", "tcx", "cost", str(folder / "run.tcx"), "--width", "110"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out["text"] = text.stdout + (f"\n[stderr]\n{text.stderr}" if text.returncode else "")
    return out


def profiler_kernels(folder: Path, calls: list[int]) -> tuple[dict[str, float], dict[str, float], str]:
    """Per kernel name: the profiler's device time per step (ms) and launches per step, averaged over
    the profiled steps `calls`; and the profiler's own table of the first of them."""
    per_name: dict[str, float] = {}
    launches: dict[str, float] = {}
    used = 0
    for index in calls:
        path = folder / f"call{index}.json"
        if not path.exists():
            continue
        used += 1
        trace = json.loads(path.read_text())
        events = trace["traceEvents"] if isinstance(trace, dict) else trace
        for e in events:
            # device work as the profiler's table counts it: kernels, and memsets (a CUDA-graph replay's)
            if e.get("cat") in ("kernel", "gpu_memset") and e.get("ph") == "X":
                per_name[e["name"]] = per_name.get(e["name"], 0.0) + float(e["dur"]) / 1000
                launches[e["name"]] = launches.get(e["name"], 0.0) + 1
    table_path = folder / f"call{calls[0]}.txt" if calls else None
    table = table_path.read_text() if table_path and table_path.exists() else "(no table)"
    if not used:
        return {}, {}, table
    return {k: v / used for k, v in per_name.items()}, {k: v / used for k, v in launches.items()}, table


def compare(run: dict[str, Any], work: Path) -> dict[str, Any]:
    """tcx's kernel rows against the profiler's kernels of the same steps, and the hand counts."""
    doc = run["doc"]
    group = (doc.get("steps") or [{}])[0]
    calls = group.get("profiled_steps") or []
    profiler_ms, profiler_launches, table = profiler_kernels(work / run["name"] / "profiler", calls)
    ours: dict[str, float] = {}
    our_launches: dict[str, float] = {}
    for row in group.get("breakdown", []):
        for name, k in (row.get("device_kernels") or {}).items():
            ours[name] = ours.get(name, 0.0) + k["ms_per_step"]
            our_launches[name] = our_launches.get(name, 0.0) + k["launches_per_step"]
    by_name = [
        {
            "name": name,
            "tcx_ms": ours.get(name),
            "profiler_ms": profiler_ms.get(name),
            "tcx_launches": our_launches.get(name),
            "profiler_launches": profiler_launches.get(name),
            "agree": bool(ours.get(name) and profiler_ms.get(name))
            and abs(ours[name] / profiler_ms[name] - 1) <= TOLERANCE,
        }
        for name in sorted(set(ours) | set(profiler_ms))
    ]
    kernels = []
    for row in group.get("breakdown", []):
        if row.get("own_ms_per_step") is None or not row.get("device_kernels"):
            continue
        names = list(row["device_kernels"])
        theirs = sum(profiler_ms.get(n, 0.0) for n in names)
        gpu = row.get("gpu") or {}
        kernels.append(
            {
                "part": row["part"],
                "phase": row.get("phase"),
                "name": row["name"],
                "site": row.get("site"),
                "user_line": row.get("user_line"),
                "replayed": row.get("replayed"),
                "device_kernels": names,
                "tcx_ms": row["own_ms_per_step"],
                "launch_ms": row.get("launch_ms_per_step"),
                "profiler_ms": theirs,
                "agree": bool(theirs) and abs(row["own_ms_per_step"] / theirs - 1) <= TOLERANCE,
                "tcx_launches": row.get("launches_per_step"),
                "tcx_bytes": gpu.get("bytes"),
                "tcx_flops": gpu.get("flops"),
                "flops_from": gpu.get("flops_from"),
                "tcx_bandwidth_tb_s": (gpu.get("bandwidth_bytes_s") or 0) / 1e12 or None,
                "tcx_tflop_s": (gpu.get("flops_s") or 0) / 1e12 or None,
                "share_of_peak": gpu.get("share_of_peak"),
                "bound": gpu.get("bound"),
                "peak_source": gpu.get("peak_source"),
            }
        )
    out: dict[str, Any] = {
        "name": run["name"],
        "profiled_steps": calls,
        "step_ms": doc.get("step_ms"),
        "step_ms_interval": doc.get("step_ms_interval"),
        "eager_step_ms": doc.get("eager_step_ms"),
        "speedup": doc.get("speedup"),
        "speedup_interval": doc.get("speedup_interval"),
        "speedup_note": doc.get("speedup_note"),
        "launch_bound": group.get("launch_bound"),
        "gpu": doc.get("gpu"),
        "by_name": by_name,
        "kernels": kernels,
        "profiler_table": table,
        "top_findings": [
            {
                k: f.get(k)
                for k in ("kind", "title", "site", "unit", "ms_per_step", "seconds", "share", "remedy")
            }
            for f in doc.get("findings", [])[:8]
        ],
    }
    hand = HAND_COUNTED.get(run["name"])
    if hand:
        out["hand_counted"] = hand_check(hand, kernels)
    return out


def hand_check(hand: dict[str, Any], kernels: list[dict[str, Any]]) -> dict[str, Any]:
    """The kernel the hand count is about (its name, or the largest), its counted bytes/FLOPs against
    tcx's, and the rate they give with the profiler's time against tcx's rate."""
    pattern = hand.get("kernel")
    chosen = [k for k in kernels if pattern and pattern in k["name"]] or sorted(
        kernels, key=lambda k: -k["tcx_ms"]
    )
    if not chosen:
        return {"error": "no kernel of tcx's breakdown matched the profiler's"}
    k = chosen[0]
    out: dict[str, Any] = {"kernel": k["name"], "profiler_ms": k["profiler_ms"]}
    seconds = k["profiler_ms"] / 1000
    if "bytes" in hand:
        out["bytes_by_hand"] = hand["bytes"]
        out["tcx_bytes"] = k["tcx_bytes"]
        out["bytes_agree"] = k["tcx_bytes"] is not None and abs(k["tcx_bytes"] / hand["bytes"] - 1) <= 0.01
        out["bandwidth_by_hand_tb_s"] = hand["bytes"] / seconds / 1e12 if seconds else None
        out["tcx_bandwidth_tb_s"] = k["tcx_bandwidth_tb_s"]
    if "flops" in hand:
        out["flops_by_hand"] = hand["flops"]
        out["tcx_flops"] = k["tcx_flops"]
        out["flops_agree"] = k["tcx_flops"] is not None and abs(k["tcx_flops"] / hand["flops"] - 1) <= 0.01
        out["tflop_s_by_hand"] = hand["flops"] / seconds / 1e12 if seconds else None
        out["tcx_tflop_s"] = k["tcx_tflop_s"]
    out["share_of_peak"] = k["share_of_peak"]
    out["peak_source"] = k["peak_source"]
    return out


def summary_text(results: dict[str, Any]) -> str:
    lines = [
        f"tcx cost vs torch.profiler on {results['device']} "
        f"(torch {results['torch']}, triton {results['triton']})",
        "",
    ]
    for w in results["workloads"]:
        lines.append(f"== {w['name']}  (exit {w.get('exit_code')}, {w.get('seconds')} s)")
        if w.get("error"):
            lines += ["   " + ln for ln in str(w["error"]).splitlines()[-20:]]
            continue
        c = w["comparison"]
        lines.append(
            f"   step {c['step_ms']} ms, eager {c['eager_step_ms']} ms, speedup {c['speedup']} "
            f"({c['speedup_note'] or 'shown'}); profiled steps {c['profiled_steps']}; launch-bound "
            f"{json.dumps(c['launch_bound'])}"
        )
        lines.append("   by kernel name, device ms per step (tcx / profiler):")
        for k in c["by_name"]:
            mark = "ok  " if k["agree"] else "DIFF"
            lines.append(
                f"   {mark} {k['name'][:70]:<70} {k['tcx_ms'] or 0:.4f} / {k['profiler_ms'] or 0:.4f}  "
                f"launches {k['tcx_launches']}/{k['profiler_launches']}"
            )
        lines.append("   rows (device time, launch cost, rate):")
        for k in c["kernels"][:30]:
            rate = f"{k['tcx_tflop_s']:.1f} TFLOP/s" if k["tcx_tflop_s"] else ""
            rate += f" {k['tcx_bandwidth_tb_s']:.2f} TB/s" if k["tcx_bandwidth_tb_s"] else ""
            line = (k.get("user_line") or {}).get("line")
            lines.append(
                f"   {k['part']:<7} {k['phase'] or '':<9} {k['name'][:40]:<40} site {k['site']} line {line} "
                f"device {k['tcx_ms']:.4f} launch {k['launch_ms'] or 0:.4f} ms {rate}"
                + (" (CUDA-graph replay)" if k["replayed"] else "")
            )
        if c.get("hand_counted"):
            lines.append(f"   hand-counted: {json.dumps(c['hand_counted'])}")
        lines.append("   first findings: " + json.dumps(c["top_findings"][:4]))
        lines.append("   torch.profiler's own table (first profiled step):")
        lines += ["   " + ln for ln in c["profiler_table"].splitlines()]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir = Path(argv[0])
    names = argv[1:] or list(WORKLOADS)
    unknown = [n for n in names if n not in WORKLOADS]
    if unknown:
        print(f"unknown workloads {unknown}; known: {', '.join(WORKLOADS)}", file=sys.stderr)
        return 2
    out_dir.mkdir(parents=True, exist_ok=True)
    import torch

    if not torch.cuda.is_available():
        print("no CUDA device: this script measures kernels on a GPU", file=sys.stderr)
        return 2
    try:
        import triton

        triton_version = triton.__version__
    except ImportError:
        triton_version = None
    results: dict[str, Any] = {
        "schema": "tcx.gpu_cost/1",
        "device": torch.cuda.get_device_name(0),
        "torch": torch.__version__,
        "triton": triton_version,
        "tolerance": TOLERANCE,
        "workloads": [],
    }
    with tempfile.TemporaryDirectory(prefix="tcx-gpu-cost-") as tmp:
        work = Path(tmp)
        for name in names:
            print(f"tcx cost {name} ...", file=sys.stderr, flush=True)
            run = tcx_cost(name, work, timeout=420.0)
            entry = {k: v for k, v in run.items() if k not in ("doc", "text")}
            if "doc" in run:
                entry["comparison"] = compare(run, work)
            results["workloads"].append(entry)
            if name == "tiny_llama" and "text" in run:
                (out_dir / "cost_tiny_llama.txt").write_text(run["text"], encoding="utf-8")
                trace = work / name / "trace.json"
                if trace.exists():
                    (out_dir / "trace_tiny_llama.json").write_text(trace.read_text(), encoding="utf-8")
        write_tar(work, out_dir / "runs.tar.gz")
    (out_dir / "gpu_cost.json").write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    (out_dir / "gpu_cost.txt").write_text(summary_text(results) + "\n", encoding="utf-8")
    print(summary_text(results))
    failed = [w["name"] for w in results["workloads"] if w.get("exit_code") != 0 or w.get("error")]
    if failed:  # a workload tcx could not measure fails the script (its error is in gpu_cost.json)
        print(f"tcx cost failed for {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


def write_tar(work: Path, dest: Path) -> None:
    """Every run's recording and the profiler's exports, if the archive stays under 16 MiB."""
    with tarfile.open(dest, "w:gz") as tar:
        for path in sorted(work.rglob("*")):
            if path.is_file() and (path.suffix in (".tcx", ".txt") or path.name.startswith("call")):
                tar.add(path, arcname=str(path.relative_to(work)))
    if dest.stat().st_size > MAX_TAR:
        dest.unlink()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
