"""Run on a machine with an NVIDIA GPU: the real CUDA path vs tcx's CUDA preview (GPU hidden), same torch.

    python bench/gpu_compare.py OUT_DIR [sm_90] [PROGRAM ...]

For each program it records (1) a real run with `--device cuda` and (2) a preview run with
CUDA_VISIBLE_DEVICES="" and `--target cuda:sm_XX`, then compares every graph's kernels (source,
raw and after normalising the lines that name a file or a build hash) and wrapper `call()`.
A difference counts as named when the preview recorded a decision it could not take without a
GPU (`cuda_preview_decision`) for that graph. CUDA-graph events (`mode="reduce-overhead"`) of
both runs are listed side by side. Writes compare.json and compare.txt.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from tcx.core import driver
from tcx.core.analysis import build_model
from tcx.core.callspec import parse_call_spec, spec_to_json
from tcx.core.codegen_view import build_codegen
from tcx.core.recording import load_recording
from tcx.core.targets import resolve_target
from tcx.core.torchtext.output_code import call_body

ROOT = Path(__file__).resolve().parent.parent
GPU = ROOT / "fixtures/programs/gpu"
PROGRAMS: list[tuple[str, str, list[str]]] = [
    ("seed_f", str(ROOT / "fixtures/programs/seed_f.py") + ":f", ["128x32:grad,32x64:grad,64:grad"]),
    ("train_step", str(ROOT / "fixtures/programs/train_step.py") + ":step", []),
    *[(p.stem, str(p), []) for p in sorted(GPU.glob("*.py"))],
]
_NORM = re.compile(r"'backend_hash': '[0-9A-Fa-f]+'|# kernel path: .*|# \[Provenance debug handles\].*")
CAPTURES = ["codegen", "cudagraphs"]


def record(target: str, calls: list[str], caps: list[str], out: Path) -> float:
    """One live run (a child process) kept at `out`; returns its wall time."""
    started = time.monotonic()
    opts = driver.RunOptions(
        backend="inductor",
        capture=caps,
        calls=[spec_to_json(parse_call_spec(c)) for c in calls] or None,
        timeout=480,
    )
    run = driver.record(resolve_target(target), opts)
    driver.keep(run, str(out))
    run.cleanup()
    return round(time.monotonic() - started, 1)


def record_all(jobs: int, runs: list[tuple[str, str, list[str], list[str], Path]]) -> dict[str, float]:
    """The runs side by side (each is a child process), `jobs` at a time."""
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = {name: pool.submit(record, t, c, caps, out) for name, t, c, caps, out in runs}
        return {name: f.result() for name, f in futures.items()}


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
    return [e for e in model.recorder_events if e.get("kind") == kind]


def compare(name: str, real_m: Any, prev_m: Any, arch: str) -> dict[str, Any]:
    real = build_codegen(real_m, device="run")
    prev = build_codegen(prev_m, device=f"cuda:{arch}")
    decisions = _events(prev_m, "cuda_preview_decision")
    entry: dict[str, Any] = {
        "real_kernel_count": real.kernel_count,
        "preview_kernel_count": prev.kernel_count,
        "preview_unavailable": prev.unavailable,
        "preview_errors": prev.preview_errors,
        "program_exit": {
            "real": (real_m.program_exit or {}).get("status"),
            "preview": (prev_m.program_exit or {}).get("status"),
        },
        "decisions": [{k: v for k, v in d.items() if k not in ("kind", "seq", "t")} for d in decisions],
        "cudagraphs": {
            "real": [_cg(e) for e in _events(real_m, "cudagraph")],
            "preview": [_cg(e) for e in _events(prev_m, "cudagraph")],
        },
        "graphs": [],
    }
    keys = list(dict.fromkeys([(o.compile_id, o.graph) for o in real.outputs + prev.outputs]))
    kernels_same = kernels_total = wrappers_same = wrappers_total = named = unnamed = 0
    for cid, graph in keys:
        ro = next((o for o in real.outputs if (o.compile_id, o.graph) == (cid, graph)), None)
        po = next((o for o in prev.outputs if (o.compile_id, o.graph) == (cid, graph)), None)
        rk = {k.name: k.source for k in real.kernels if (k.compile_id, k.graph) == (cid, graph)}
        pk = {k.name: k.source for k in prev.kernels if (k.compile_id, k.graph) == (cid, graph)}
        why = [d for d in decisions if d.get("compile_id") == cid and d.get("graph") in (graph, None)]
        names = sorted({f"{d.get('decision')}: {d.get('op', '')} -> {d.get('assumed')}" for d in why})
        g: dict[str, Any] = {"compile_id": cid, "graph": graph, "kernels": {}, "preview_decisions": names}
        for k in sorted(set(rk) | set(pk)):
            if k not in rk or k not in pk:
                status = "only in the real run" if k in rk else "only in the preview"
            else:
                status = _status(rk[k], pk[k])
            g["kernels"][k] = status
            kernels_total += 1
            if status.startswith("identical"):
                kernels_same += 1
            else:
                g.setdefault("kernel_diffs", {})[k] = _diff(rk.get(k, ""), pk.get(k, ""))
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
        differs = (g["wrapper_call"] != "identical" and not g["wrapper_call"].startswith("identical")) or any(
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
        "graphs_differing_named": named,
        "graphs_differing_unnamed": unnamed,
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


def main() -> None:
    out = Path(sys.argv[1])
    arch = sys.argv[2] if len(sys.argv) > 2 else "sm_90"
    wanted = set(sys.argv[3:])
    jobs = int(os.environ.get("TCX_COMPARE_JOBS", "6"))
    out.mkdir(parents=True, exist_ok=True)
    programs = [p for p in PROGRAMS if not wanted or p[0] in wanted]
    real_s = record_all(
        jobs, [(n, t, c, [*CAPTURES, "device=cuda"], out / f"{n}_real.tcx") for n, t, c in programs]
    )
    os.environ["CUDA_VISIBLE_DEVICES"] = ""  # the previews see no GPU (their children inherit this)
    prev_s = record_all(
        jobs,
        [(n, t, c, [*CAPTURES, f"cuda_preview={arch}"], out / f"{n}_preview.tcx") for n, t, c in programs],
    )
    del os.environ["CUDA_VISIBLE_DEVICES"]
    report: dict[str, Any] = {}
    lines = []
    for name, _target, _calls in programs:
        real_m = build_model(load_recording(out / f"{name}_real.tcx"))
        prev_m = build_model(load_recording(out / f"{name}_preview.tcx"))
        entry = compare(name, real_m, prev_m, arch)
        entry["seconds"] = {"real": real_s[name], "preview": prev_s[name]}
        report[name] = entry
        s = entry["summary"]
        lines.append(
            f"{name:20s} kernels {s['kernels_identical']}/{s['kernels_total']} identical, "
            f"wrappers {s['wrappers_identical']}/{s['wrappers_total']} identical; differing graphs: "
            f"{s['graphs_differing_named']} named by the preview, {s['graphs_differing_unnamed']} not named"
        )
        for g in entry["graphs"]:
            if g.get("difference_named_by_preview") is not None:
                lines.append(
                    f"    {g['compile_id']} {g['graph']}: "
                    + ", ".join(f"{k} {v}" for k, v in g["kernels"].items() if not v.startswith("identical"))
                    + f"; wrapper {g['wrapper_call']}; preview named: {g['preview_decisions'] or 'nothing'}"
                )
        for side in ("real", "preview"):
            for c in entry["cudagraphs"][side]:
                lines.append(
                    f"    cudagraphs {side:7s} {c['event']:14s} {c['compile_id']} {c['graph']} "
                    f"{c['when'] or ''} {c['message'] or ''}"
                )
    import torch

    report["env"] = {"torch": torch.__version__, "gpu": torch.cuda.get_device_name(0)}
    try:
        import triton

        report["env"]["triton"] = triton.__version__
    except ImportError:
        pass
    (out / "compare.json").write_text(json.dumps(report, indent=1))
    (out / "compare.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    print(json.dumps(report["env"]))


if __name__ == "__main__":
    main()
