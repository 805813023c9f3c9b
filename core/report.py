"""`tcx report`: the whole run at a glance, then every view — built from ONE recording.

The overview gives each compiled frame's pipeline in one line (Dynamo → AOTAutograd →
Inductor → runtime), compile time per phase, and the top problems ranked by what they
cost; the views follow. Each view is built from its own module's JSON contract, and a
view that cannot be built says why instead of sinking the report.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tcx import __version__
from tcx.core.analysis import RunModel
from tcx.core.explain import Explanation, explain, program_status
from tcx.core.explain import to_json as explain_json
from tcx.core.run_facts import run_facts

SCHEMA = "tcx.report/1"
# Every capture the views use: the report runs the program once with all of them.
CAPTURES = ("recompiles", "guards", "bytecode", "instructions", "aot_graphs", "fusion", "codegen")
_ATEN_OP = re.compile(r"= torch\.ops\.")


@dataclass
class Problem:
    rank: int  # lower is worse
    kind: str
    title: str
    detail: str
    where: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass
class Report:
    model: RunModel
    explanation: Explanation
    views: dict[str, Any]  # view name -> its view object (None when unavailable)
    docs: dict[str, dict[str, Any]]  # view name -> its JSON document, or {"unavailable": why}
    pipeline: list[dict[str, Any]]
    problems: list[Problem]
    compile_time_s: dict[str, float] = field(default_factory=dict)


def _views() -> dict[str, tuple[Callable[[RunModel, str | None], Any], Callable[[Any], dict[str, Any]]]]:
    from tcx.core import bytecode_view, codegen_view, fusion_view, graphs_view, guards, recompiles, trace_view

    return {
        "recompiles": (lambda m, fn: recompiles.analyze(m, fn), recompiles.to_json),
        "guards": (lambda m, fn: guards.build_guards(m, fn), guards.to_json),
        "trace": (lambda m, fn: trace_view.build_trace(m, fn), trace_view.to_json),
        "bytecode": (lambda m, fn: bytecode_view.build_bytecode(m, fn), bytecode_view.to_json),
        "graphs": (
            lambda m, fn: graphs_view.build_graphs(m),
            lambda v: graphs_view.to_json(v, include_graphs=True),
        ),
        "fusion": (lambda m, fn: fusion_view.build_fusion(m), fusion_view.to_json),
        "codegen": (lambda m, fn: codegen_view.build_codegen(m), codegen_view.to_json),
    }


def build_report(model: RunModel, function: str | None = None) -> Report:
    ex = explain(model, function)
    views: dict[str, Any] = {}
    docs: dict[str, dict[str, Any]] = {"explain": explain_json(ex)}
    for name, (build, as_json) in _views().items():
        try:
            views[name] = build(model, function)
            docs[name] = as_json(views[name])
        except Exception as exc:  # one view failing must not sink the report
            views[name] = None
            docs[name] = {"unavailable": f"{name} view could not be built: {type(exc).__name__}: {exc}"}
    return Report(
        model=model,
        explanation=ex,
        views=views,
        docs=docs,
        pipeline=_pipeline(model, docs),
        problems=_problems(model, ex, docs),
        compile_time_s=run_facts(model, ex)["compile_time_s"],
    )


def _pipeline(model: RunModel, docs: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """One line per compile: what each stage made of it."""
    instructions = {
        c["compile_id"]: len(c.get("instructions") or [])
        for c in docs["trace"].get("compiles", [])
        if not c.get("attempt")
    }
    graphs = {c["compile_id"]: c for c in docs["graphs"].get("compiles", [])}
    kernels: dict[str, int] = {}
    externs: dict[str, int] = {}
    for k in docs["codegen"].get("kernels", []):
        kernels[k["compile_id"]] = kernels.get(k["compile_id"], 0) + 1
    for e in docs["codegen"].get("extern_calls", []):
        externs[e["compile_id"]] = externs.get(e["compile_id"], 0) + 1
    breaks: dict[str, int] = {}
    for b in model.graph_breaks:
        breaks[b.compile_id or "?"] = breaks.get(b.compile_id or "?", 0) + 1
    rows = []
    for cid, comp in model.compiles.items():
        g = graphs.get(cid, {})
        texts = g.get("graphs") or {}
        rows.append(
            {
                "compile_id": cid,
                "frame": comp.display_name,
                "file": comp.co_filename,
                "line": comp.co_firstlineno,
                "failed": comp.failed,
                "recompile_reason": comp.recompile_reason,
                "dynamo": {
                    "instructions": instructions.get(cid),
                    "graph_nodes": comp.graph_op_count,
                    "graph_breaks": breaks.get(cid, 0),
                },
                "aot": {
                    "forward_ops": _ops(texts.get("forward")),
                    "backward_ops": _ops(texts.get("backward")),
                    "inference_ops": _ops(texts.get("inference")),
                    "saved_bytes": g.get("saved_bytes"),
                    "saved_extra_bytes": g.get("saved_extra_bytes"),
                    "verdict": g.get("verdict"),
                },
                "inductor": {"kernels": kernels.get(cid, 0), "extern_calls": externs.get(cid, 0)},
                "runtime": {"guards": comp.guard_count, "recompiled": bool(comp.recompile_reason)},
                "compile_time_s": comp.compile_time_s,
            }
        )
    return rows


def _ops(text: str | None) -> int | None:
    return len(_ATEN_OP.findall(text)) if text else None


def _problems(model: RunModel, ex: Explanation, docs: dict[str, dict[str, Any]]) -> list[Problem]:
    out: list[Problem] = []
    for f in ex.failed_frames:
        out.append(
            Problem(0, "failed frame", f"{f.function} runs in eager Python", f.kind, f"{f.file}:{f.line}")
        )
    rec = docs["recompiles"]
    limit = rec.get("recompile_limit") or {}
    if limit.get("hit"):
        out.append(
            Problem(
                0,
                "recompile limit",
                f"{limit.get('config')} ({limit.get('limit')}) reached",
                "later calls of that frame run in eager Python; see the recompiles view",
            )
        )
    for s in ex.sites:
        rank = 1 if s.frame_skipped else 2
        out.append(
            Problem(
                rank,
                "graph break",
                f"{s.gb_type} ×{len(s.occurrences)}",
                s.suggestion or s.explanation,
                f"{s.file}:{s.line}",
            )
        )
    if model.recompile_count:
        causes = [c for c in rec.get("calls", []) if c.get("outcome") == "recompile" and c.get("cause")]
        detail = "; ".join(
            dict.fromkeys(f"{c['cause']}: {c.get('remedy') or ''}".strip(": ") for c in causes)
        )
        out.append(
            Problem(
                3, "recompiles", f"{model.recompile_count} recompile(s)", detail or "see the recompiles view"
            )
        )
    status = program_status(model)
    if status["status"] not in ("ok", "not recorded"):
        out.append(
            Problem(0, "program", f"the program ended: {status['status']}", str(status.get("message") or ""))
        )
    out.sort(key=lambda p: p.rank)
    return out


def to_json(report: Report) -> dict[str, Any]:
    return {
        "schema": SCHEMA,
        "tcx_version": __version__,
        "torch_version": report.model.torch_version,
        "target": report.model.target,
        "pipeline": report.pipeline,
        "compile_time_s": report.compile_time_s,
        "problems": [p.to_json() for p in report.problems],
        "views": report.docs,
    }
