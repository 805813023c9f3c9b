"""Run on a machine with an NVIDIA GPU: the real CUDA path vs tcx's CUDA preview (GPU hidden), same torch.

    python bench/gpu_compare.py OUT_DIR [sm_90] [PROGRAM ...]        record both runs, then compare
    python bench/gpu_compare.py --compare-only OUT_DIR [sm_90]       compare recordings already there

For each program it records (1) a real run with `--device cuda` and (2) a preview run with
CUDA_VISIBLE_DEVICES="" and `--target cuda:sm_XX` (the preview must run on the same torch and
triton as the real run: on the GPU machine itself, with the GPU hidden), all runs side by side.
Then it compares, per program: how each run ended; graphs, graph breaks, compiles and recompiles;
the modules (forward/backward/inference) each run generated; every graph's kernels (source, raw
and after normalising the lines that name a file or a build hash) and wrapper `call()`; and each
kernel's "your line" (the user lines its provenance names). A difference counts as named when the
preview names that compile (core/analysis/preview_notes.py): a decision it could not take without a
GPU, a dependency on random values (a branch, number or size read from values drawn on the CUDA
device), or a graph break at tcx's stand-in for a CUDA function. CUDA-graph events
(`mode="reduce-overhead"`) of both runs are listed side by side. Writes compare.json, compare.txt
and recordings.tar.gz (every recording, for a comparison elsewhere). Exits 1 when a run could not
be recorded, 0 when every program was compared (its differences are in the table).
"""

from __future__ import annotations

import json
import os
import re
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tcx.core.analysis.preview_notes import preview_notes
from tcx.core.ingest.recording import load_recording
from tcx.core.model import build_model
from tcx.core.torchtext.output_code import call_body
from tcx.core.views.codegen import build_codegen
from tcx.core.views.explain import explain

ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / "fixtures/programs/gpu"
PROGRAMS: list[tuple[str, str, list[str]]] = [
    ("seed_f", str(ROOT / "fixtures/programs/seed_f.py") + ":f", ["128x32:grad,32x64:grad,64:grad"]),
    ("train_step", str(ROOT / "fixtures/programs/train_step.py") + ":step", []),
    *[(p.stem, str(p), []) for p in sorted(GPU.glob("*.py"))],
]
_NORM = re.compile(r"'backend_hash': '[0-9A-Fa-f]+'|# kernel path: .*|# \[Provenance debug handles\].*")
CAPTURES = ["codegen", "cudagraphs"]
COUNTS = ("graph_count", "graph_break_count", "compile_count", "recompile_count")


def record(target: str, calls: list[str], caps: list[str], env: dict[str, str], out: Path) -> float:
    """One live run (a child process) kept at `out`; returns its wall time."""
    from tcx.core.run import driver
    from tcx.core.run.callspec import parse_call_spec, spec_to_json
    from tcx.core.run.targets import resolve_target

    started = time.monotonic()
    opts = driver.RunOptions(
        caches="off",
        capture=caps,
        calls=[spec_to_json(parse_call_spec(c)) for c in calls] or None,
        timeout=420,
        env=env,
    )
    run = driver.record(resolve_target(target), opts)
    driver.keep(run, str(out))
    run.cleanup()
    return round(time.monotonic() - started, 1)


def record_all(jobs: int, runs: list[tuple[str, str, list[str], list[str], dict, Path]]) -> dict[str, float]:
    """The runs side by side (each is a child process), `jobs` at a time."""
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {key: pool.submit(record, t, c, caps, env, out) for key, t, c, caps, env, out in runs}
        seconds = {}
        for key, future in futures.items():
            try:
                seconds[key] = future.result()
            except Exception as exc:  # a run tcx could not start: the comparison says so
                print(f"{key}: {type(exc).__name__}: {exc}", flush=True)
                seconds[key] = -1.0
        return seconds


def _status(a: str, b: str) -> str:
    if a == b:
        return "identical"
    if _NORM.sub("", a) == _NORM.sub("", b):
        return "identical after normalising hash/path"
    return "DIFFERENT"


def _diff(a: str, b: str, limit: int = 12) -> list[str]:
    al, bl = a.splitlines(), b.splitlines()
    return ([f"- {x}" for x in al if x not in bl][:limit]) + ([f"+ {x}" for x in bl if x not in al][:limit])


def _events(model: Any, kind: str) -> list[dict[str, Any]]:
    """Every recorded event of `kind`, raw: this comparison lists them all, as the recorder wrote them
    (the model keeps them private: a view reads its CUDA-graph facts instead)."""
    return model._captures.of(kind)


def _lines(kernel: Any) -> list[str]:
    return sorted(
        {f"{os.path.basename(u['file'])}:{u['line']}" for u in kernel.origins.get("user_lines") or []}
    )


def compare(name: str, real_m: Any, prev_m: Any, arch: str) -> dict[str, Any]:
    real = build_codegen(real_m, device="run")
    prev = build_codegen(prev_m, device=f"cuda:{arch}")
    # what the preview names: its decisions, the compiles that depend on random values, the graph
    # breaks at tcx's stand-ins (core/analysis/preview_notes.py)
    decisions = preview_notes(prev_m, arch)["decisions"]
    real_ex, prev_ex = explain(real_m), explain(prev_m)
    entry: dict[str, Any] = {
        "real_kernel_count": real.kernel_count,
        "preview_kernel_count": prev.kernel_count,
        "modules": {"real": len(real.outputs), "preview": len(prev.outputs)},
        "counts": {k: {"real": getattr(real_ex, k), "preview": getattr(prev_ex, k)} for k in COUNTS},
        "preview_unavailable": prev.unavailable,
        "preview_errors": prev.preview_errors,
        "program_exit": {
            "real": (real_m._program_exit or {}).get("status"),
            "preview": (prev_m._program_exit or {}).get("status"),
            "preview_message": (prev_m._program_exit or {}).get("message"),
        },
        "decisions": decisions,
        "cudagraphs": {
            "real": [_cg(e) for e in _events(real_m, "cudagraph")],
            "preview": [_cg(e) for e in _events(prev_m, "cudagraph")],
        },
        "graphs": [],
    }
    keys = list(dict.fromkeys([(o.compile_id, o.graph) for o in real.outputs + prev.outputs]))
    kernels_same = kernels_total = wrappers_same = wrappers_total = named = unnamed = 0
    lines_same = lines_total = 0
    for cid, graph in keys:
        ro = next((o for o in real.outputs if (o.compile_id, o.graph) == (cid, graph)), None)
        po = next((o for o in prev.outputs if (o.compile_id, o.graph) == (cid, graph)), None)
        rk = {k.name: k for k in real.kernels if (k.compile_id, k.graph) == (cid, graph)}
        pk = {k.name: k for k in prev.kernels if (k.compile_id, k.graph) == (cid, graph)}
        why = [d for d in decisions if d.get("compile_id") == cid and d.get("graph") in (graph, None)]
        names = sorted({f"{d.get('decision')}: {d.get('what', '')} -> {d.get('assumed')}" for d in why})
        g: dict[str, Any] = {"compile_id": cid, "graph": graph, "kernels": {}, "preview_decisions": names}
        for k in sorted(set(rk) | set(pk)):
            if k not in rk or k not in pk:
                status = "only in the real run" if k in rk else "only in the preview"
            else:
                status = _status(rk[k].source, pk[k].source)
                lines_total += 1
                real_lines, prev_lines = _lines(rk[k]), _lines(pk[k])
                if real_lines == prev_lines:
                    lines_same += 1
                else:
                    g.setdefault("your_line_diffs", {})[k] = {"real": real_lines, "preview": prev_lines}
            g["kernels"][k] = status
            kernels_total += 1
            if status.startswith("identical"):
                kernels_same += 1
            else:
                g.setdefault("kernel_diffs", {})[k] = _diff(
                    rk[k].source if k in rk else "", pk[k].source if k in pk else ""
                )
        rc = call_body(ro.source)[0] if ro else ""
        pc = call_body(po.source)[0] if po else ""
        g["wrapper_call"] = (
            _status(rc, pc) if ro and po else ("only in the real run" if ro else "only in the preview")
        )
        wrappers_total += 1
        if g["wrapper_call"].startswith("identical"):
            wrappers_same += 1
        else:
            g["wrapper_diff"] = _diff(rc, pc, 16)
        differs = not g["wrapper_call"].startswith("identical") or any(
            not s.startswith("identical") for s in g["kernels"].values()
        )
        if differs:
            g["difference_named_by_preview"] = bool(names)
            named += bool(names)
            unnamed += not names
        entry["graphs"].append(g)
    entry["summary"] = {
        "kernels_identical": kernels_same,
        "kernels_total": kernels_total,
        "wrappers_identical": wrappers_same,
        "wrappers_total": wrappers_total,
        "your_line_equal": lines_same,
        "your_line_compared": lines_total,
        "graphs_differing_named": named,
        "graphs_differing_unnamed": unnamed,
        "counts_equal": all(v["real"] == v["preview"] for v in entry["counts"].values()),
        "whole": entry["modules"]["real"] == entry["modules"]["preview"]
        and entry["program_exit"]["real"] == entry["program_exit"]["preview"],
    }
    return entry


def _cg(e: dict[str, Any]) -> dict[str, Any]:
    msg = str(e.get("message") or "")
    return {
        "event": e.get("event"),
        "compile_id": e.get("compile_id"),
        "graph": e.get("graph"),
        "when": e.get("when"),
        "message": msg.splitlines()[0][:200] if msg else None,
    }


def report(out: Path, arch: str, names: list[str], seconds: dict[str, float], env: dict[str, Any]) -> int:
    """compare.json and compare.txt from the recordings in `out`; the number of programs with a
    recording missing (a run tcx could not record)."""
    result: dict[str, Any] = {}
    rows, detail = [], []
    missing = 0
    for name in names:
        paths = [out / f"{name}_real.tcx", out / f"{name}_preview.tcx"]
        if not all(p.exists() for p in paths):
            rows.append(f"{name:20s} no recording ({', '.join(p.name for p in paths if not p.exists())})")
            missing += 1
            continue
        real_m, prev_m = (build_model(load_recording(p)) for p in paths)
        entry = compare(name, real_m, prev_m, arch)
        entry["seconds"] = {"real": seconds.get(f"{name}_real"), "preview": seconds.get(f"{name}_preview")}
        result[name] = entry
        s, m, ex = entry["summary"], entry["modules"], entry["program_exit"]
        pairs = [
            (m["preview"], m["real"]),
            (s["kernels_identical"], s["kernels_total"]),
            (s["wrappers_identical"], s["wrappers_total"]),
            (s["your_line_equal"], s["your_line_compared"]),
            (s["graphs_differing_named"], s["graphs_differing_named"] + s["graphs_differing_unnamed"]),
        ]
        rows.append(
            f"{name:20s} "
            + " ".join(f"{a:>4}/{b:<4}" for a, b in pairs)
            + f" {'yes' if s['counts_equal'] else 'NO':>6}  {ex['real']}/{ex['preview']}"
        )
        detail.append(
            f"{name}: counts real/preview "
            + ", ".join(
                f"{k.replace('_count', 's')} {v['real']}/{v['preview']}" for k, v in entry["counts"].items()
            )
        )
        if ex["preview"] != ex["real"]:
            detail.append(f"    preview ended {ex['preview']}: {str(ex['preview_message'] or '')[:300]}")
        for g in entry["graphs"]:
            if g.get("difference_named_by_preview") is not None:
                detail.append(
                    f"    {g['compile_id']} {g['graph']}: "
                    + ", ".join(f"{k} {v}" for k, v in g["kernels"].items() if not v.startswith("identical"))
                    + f"; wrapper {g['wrapper_call']}; preview named: {g['preview_decisions'] or 'nothing'}"
                )
            for k, lines in (g.get("your_line_diffs") or {}).items():
                detail.append(f"    your line {g['compile_id']} {g['graph']} {k}: {lines}")
        for side in ("real", "preview"):
            for c in entry["cudagraphs"][side]:
                detail.append(
                    f"    cudagraphs {side:7s} {c['event']:14s} {c['compile_id']} {c['graph']} "
                    f"{c['when'] or ''} {c['message'] or ''}"
                )
    total = [result[n]["summary"] for n in result]
    modules = [result[n]["modules"] for n in result]
    header = (
        f"{'program':20s} modules   kernels   wrappers  your line differing counts  exit real/preview\n"
        f"{'':20s} prev/real identical identical equal     named     equal"
    )
    sums = [
        (sum(m["preview"] for m in modules), sum(m["real"] for m in modules)),
        *[
            (sum(s[a] for s in total), sum(s[b] for s in total))
            for a, b in (
                ("kernels_identical", "kernels_total"),
                ("wrappers_identical", "wrappers_total"),
                ("your_line_equal", "your_line_compared"),
            )
        ],
        (
            sum(s["graphs_differing_named"] for s in total),
            sum(s["graphs_differing_named"] + s["graphs_differing_unnamed"] for s in total),
        ),
    ]
    footer = (
        f"{'total':20s} "
        + " ".join(f"{a:>4}/{b:<4}" for a, b in sums)
        + f" {sum(s['counts_equal'] for s in total):>3}/{len(total)} programs"
    )
    result["env"] = env
    (out / "compare.json").write_text(json.dumps(result, indent=1))
    text = "\n".join([header, *rows, footer, "", *detail]) + "\n"
    (out / "compare.txt").write_text(text)
    print(text)
    print(json.dumps(env))
    return missing


def main() -> int:
    """0 when every program was recorded both ways and compared; 1 when a run could not be recorded
    (the table says which); 2 on a bad command line."""
    argv = sys.argv[1:]
    compare_only = "--compare-only" in argv
    argv = [a for a in argv if a != "--compare-only"]
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    out = Path(argv[0])
    arch = argv[1] if len(argv) > 1 else "sm_90"
    wanted = set(argv[2:])
    programs = [p for p in PROGRAMS if not wanted or p[0] in wanted]
    names = [n for n, _, _ in programs]
    if compare_only:
        saved = json.loads((out / "compare.json").read_text()) if (out / "compare.json").exists() else {}
        env = saved.get("env") or {}
        seconds = {
            f"{n}_{side}": saved.get(n, {}).get("seconds", {}).get(side)
            for n in names
            for side in ("real", "preview")
        }
        recorded = [n for n in names if (out / f"{n}_real.tcx").exists()]
        return 1 if report(out, arch, recorded, seconds, env) else 0
    out.mkdir(parents=True, exist_ok=True)
    jobs = int(os.environ.get("TCX_COMPARE_JOBS", "8"))
    runs = []
    for n, t, c in programs:
        runs.append((f"{n}_real", t, c, [*CAPTURES, "device=cuda"], {}, out / f"{n}_real.tcx"))
        # the preview sees no GPU (its child process starts with CUDA_VISIBLE_DEVICES empty)
        runs.append(
            (
                f"{n}_preview",
                t,
                c,
                [*CAPTURES, f"cuda_preview={arch}"],
                {"CUDA_VISIBLE_DEVICES": ""},
                out / f"{n}_preview.tcx",
            )
        )
    started = time.monotonic()
    seconds = record_all(jobs, runs)
    import torch

    env: dict[str, Any] = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
    try:
        import triton

        env["triton"] = triton.__version__
    except ImportError:
        pass
    env["seconds_all_runs"] = round(time.monotonic() - started, 1)
    with tarfile.open(out / "recordings.tar.gz", "w:gz") as tar:
        for path in sorted(out.glob("*.tcx")):
            tar.add(path, arcname=path.name)
    missing = report(out, arch, names, seconds, env)
    failed = [key for key, secs in seconds.items() if secs < 0]
    if missing or failed:
        print(f"not recorded: {', '.join(failed) or f'{missing} program(s)'}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
