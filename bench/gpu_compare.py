"""Run on a machine with an NVIDIA GPU: the real CUDA path vs tcx's CUDA preview (GPU hidden), same torch.

    python bench/gpu_compare.py OUT_DIR [sm_90]

For each fixture it records (1) a real run with `--device cuda` and (2) a preview run with
CUDA_VISIBLE_DEVICES="" and `--target cuda:sm_XX`, then compares kernel names and sources per graph
(raw, and after normalising the lines that name a file or a build hash) and writes compare.json/.txt.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from tcx.core import driver
from tcx.core.analysis import build_model
from tcx.core.callspec import parse_call_spec, spec_to_json
from tcx.core.codegen_view import build_codegen, call_body
from tcx.core.recording import load_recording
from tcx.core.targets import resolve_target

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = [
    ("seed_f", str(ROOT / "fixtures/programs/seed_f.py") + ":f", ["128x32:grad,32x64:grad,64:grad"]),
    ("train_step", str(ROOT / "fixtures/programs/train_step.py") + ":step", []),
]
_NORM = re.compile(r"'backend_hash': '[0-9A-Fa-f]+'|# kernel path: .*|# \[Provenance debug handles\].*")


def record(target: str, calls: list[str], caps: list[str], out: Path, env: dict[str, str]) -> object:
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        opts = driver.RunOptions(
            backend="inductor",
            capture=caps,
            calls=[spec_to_json(parse_call_spec(c)) for c in calls] or None,
        )
        run = driver.record(resolve_target(target), opts)
        driver.keep(run, str(out))
        run.cleanup()
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    return build_model(load_recording(out))


def main() -> None:
    out = Path(sys.argv[1])
    arch = sys.argv[2] if len(sys.argv) > 2 else "sm_90"
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {}
    lines = []
    for name, target, calls in FIXTURES:
        real_m = record(target, calls, ["codegen", "device=cuda"], out / f"{name}_real.tcx", {})
        prev_m = record(
            target,
            calls,
            ["codegen", f"cuda_preview={arch}"],
            out / f"{name}_preview.tcx",
            {"CUDA_VISIBLE_DEVICES": ""},
        )
        real = build_codegen(real_m, "run")
        prev = build_codegen(prev_m, f"cuda:{arch}")
        entry: dict = {
            "real_kernel_count": real.kernel_count,
            "preview_kernel_count": prev.kernel_count,
            "preview_unavailable": prev.unavailable,
            "preview_errors": prev.preview_errors,
            "preview_seconds": [o.seconds for o in prev.outputs],
            "graphs": [],
        }
        for ro in real.outputs:
            po = next(
                (p for p in prev.outputs if p.graph == ro.graph and p.compile_id == ro.compile_id), None
            )
            rk = {
                k.name: k.source
                for k in real.kernels
                if k.graph == ro.graph and k.compile_id == ro.compile_id
            }
            pk = {
                k.name: k.source
                for k in prev.kernels
                if k.graph == ro.graph and k.compile_id == ro.compile_id
            }
            g = {
                "compile_id": ro.compile_id,
                "graph": ro.graph,
                "real_device": ro.device,
                "real_kernels": list(rk),
                "preview_kernels": list(pk),
                "kernels": {},
            }
            for k in sorted(set(rk) | set(pk)):
                a, b = rk.get(k, ""), pk.get(k, "")
                g["kernels"][k] = (
                    "identical"
                    if a == b
                    else "identical after normalising hash/path"
                    if _NORM.sub("", a) == _NORM.sub("", b)
                    else "DIFFERENT"
                )
                if g["kernels"][k] == "DIFFERENT":
                    diff = [f"- {x}" for x in a.splitlines() if x not in b.splitlines()][:8]
                    diff += [f"+ {x}" for x in b.splitlines() if x not in a.splitlines()][:8]
                    g.setdefault("diffs", {})[k] = diff
            rc = _NORM.sub("", call_body(ro.source)[0]) if ro else ""
            pc = _NORM.sub("", call_body(po.source)[0]) if po else ""
            g["wrapper_call"] = "identical" if rc == pc else "DIFFERENT"
            if rc != pc:
                g["wrapper_diff"] = [f"- {x}" for x in rc.splitlines() if x not in pc.splitlines()][:10] + [
                    f"+ {x}" for x in pc.splitlines() if x not in rc.splitlines()
                ][:10]
            entry["graphs"].append(g)
            (out / f"{name}_{ro.compile_id.replace('/', '_')}_{ro.graph}_real.py").write_text(ro.source)
            if po:
                (out / f"{name}_{ro.compile_id.replace('/', '_')}_{ro.graph}_preview.py").write_text(
                    po.source
                )
            lines.append(
                f"{name} {ro.compile_id} {ro.graph}: kernels {g['kernels']}; wrapper call() "
                f"{g['wrapper_call']}"
            )
        report[name] = entry
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
