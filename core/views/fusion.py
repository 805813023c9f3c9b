"""The fusion view's facts: per graph, Inductor's scheduler nodes before fusion (ATen origins,
user lines), the fused groups and the kernel each became, extern calls, and for candidate
pairs that did not fuse, Inductor's own reason (WhyNoFuse).

Built from the `fusion` capture's events plus the codegen view (kernel names, provenance).
Pure and torch-free.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tcx.core.model import RunModel
from tcx.core.model.fusion_decisions import FusionGraph
from tcx.core.selection import Selection, whole_run
from tcx.core.torchtext.output_code import Step, decode_name
from tcx.core.views.codegen import CodegenView, Kernel, build_codegen, device_envelope

SCHEMA = "tcx.fusion/1"


@dataclass
class Group:
    name: str
    members: list[str]
    kind: str  # fused, single, extern
    kernel: str | None = None
    category: str = ""
    ops: list[str] = field(default_factory=list)


@dataclass
class KernelUse:
    """One generated kernel that several groups map to: launched once for all of them (combined when
    the kernel was generated), or launched once per group on other buffers (the same code reused)."""

    kernel: str
    kind: str  # "reused" or "combined"
    groups: list[str]
    launches: list[dict[str, Any]]  # line (in the wrapper), buffers, groups

    @property
    def text(self) -> str:
        if self.kind == "reused":
            runs = "; ".join(
                f"{', '.join(u['groups']) or '?'} on {', '.join(u['buffers']) or '?'}" for u in self.launches
            )
            return (
                f"kernel reused for {', '.join(self.groups)}: Inductor generated the same code for them, so "
                f"the wrapper launches it {len(self.launches)} times ({runs}); not a fusion"
            )
        return f"holds groups {', '.join(self.groups)} (combined into one kernel, launched once)"

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "kind": self.kind,
            "groups": self.groups,
            "launches": self.launches,
            "text": self.text,
        }


@dataclass
class GraphFusion:
    compile_id: str | None
    graph: str
    device: str
    nodes: list[dict[str, Any]]
    groups: list[Group]
    fused_pairs: list[tuple[str, str]]
    rejected: list[dict[str, Any]]  # node1, node2, reason, count
    kernel_uses: list[KernelUse] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        kernels = {g.kernel for g in self.groups if g.kernel and g.kind != "extern"}
        externs = sum(1 for g in self.groups if g.kind == "extern")
        n = len(self.nodes)
        return (
            f"{n} scheduler node{'s' if n != 1 else ''} -> {len(self.groups)} group(s): "
            f"{len(kernels)} generated kernel(s), {externs} extern call(s); "
            f"{len(self.fused_pairs)} fusion(s), {len(self.rejected)} rejected pair(s)"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "compile_id": self.compile_id,
            "graph": self.graph,
            "device": self.device,
            "verdict": self.verdict,
            "nodes": self.nodes,
            "groups": [g.__dict__ for g in self.groups],
            "fused_pairs": [list(p) for p in self.fused_pairs],
            "rejected": self.rejected,
            "kernel_uses": [u.to_json() for u in self.kernel_uses],
        }


@dataclass
class FusionView:
    model: RunModel
    selection: Selection
    device: str  # "run" (what ran) or "cuda:sm_90" (the CUDA preview's decisions)
    graphs: list[GraphFusion]
    codegen: CodegenView
    unavailable: str | None = None


def build_fusion(
    model: RunModel, selection: Selection | None = None, *, device: str = "run", graph: str | None = None
) -> FusionView:
    selection = selection or whole_run(model)
    codegen = build_codegen(model, selection, device=device, graph=graph)
    want_cuda = codegen.device.startswith("cuda:")  # a saved preview shows the preview
    graphs: list[GraphFusion] = []
    for scheduled in model.fusion:
        if not selection.includes(scheduled.compile_id):
            continue
        if want_cuda and "cuda" not in (scheduled.device or ""):
            continue  # the preview asked for: skip the CPU graphs
        if not want_cuda and scheduled.preview:
            continue
        if graph and (scheduled.graph or "?") != graph:
            continue
        graphs.append(_graph(scheduled, codegen))
    unavailable = None
    if not graphs:
        features = model.status.features
        why = features.why("fusion")
        if why:
            unavailable = why
        elif not features.recorded("fusion"):
            unavailable = (
                "no fusion decisions in this input: they are recorded by `tcx fusion` runs "
                "(TORCH_TRACE logs do not carry them)"
            )
        else:
            unavailable = codegen.unavailable or "Inductor scheduled no graph in this run"
    return FusionView(model, selection, device, graphs, codegen, unavailable)


def _graph(ev: FusionGraph, codegen: CodegenView) -> GraphFusion:
    nodes = list(ev.nodes)
    by_name = {n.get("name"): n for n in nodes}
    kernels = [k for k in codegen.kernels if k.compile_id == ev.compile_id and k.graph == ev.graph]
    wrapper = next(
        (w for w in codegen.wrappers if (w.compile_id, w.graph) == (ev.compile_id, ev.graph)),
        None,
    )
    names = {k.name for k in kernels}
    launches = [s for s in (wrapper.launches if wrapper else []) if s.kind == "launch" and s.name in names]
    groups = []
    launched: dict[str, int] = {}  # group -> index of the launch that computes it
    for g in ev.groups:
        members = [by_name.get(m, {"name": m}) for m in g.get("members") or []]
        if all(m.get("kind") == "extern" for m in members):
            kernel = members[0].get("kernel") if members else None
            groups.append(
                Group(g["name"], g.get("members") or [], "extern", kernel, "extern (vendor library)")
            )
            continue
        ops = list(dict.fromkeys(o["op"] for m in members for o in m.get("origins") or []))
        best = _match_kernel(members, kernels)
        launch = _launch_of(members, launches)
        if launch is not None:  # the wrapper says which kernel computes the group's buffers
            launched[g["name"]] = launch
            best = next((k for k in kernels if k.name == launches[launch].name), best)
        kind = "fused" if len(members) > 1 else "single"
        category = best.category if best else str((members[0].get("kind") if members else "") or "")
        groups.append(
            Group(g["name"], g.get("members") or [], kind, best.name if best else None, category, ops)
        )
    fused = [(d["node1"], d["node2"]) for d in ev.decisions if d.get("kind") == "fuse"]
    rejected: dict[tuple[Any, ...], dict[str, Any]] = {}
    for d in ev.decisions:
        if d.get("kind") != "no_fuse":
            continue
        key = (d["node1"], d["node2"], d.get("reason"))
        if key in rejected:
            rejected[key]["count"] += 1
        else:
            rejected[key] = {"node1": d["node1"], "node2": d["node2"], "reason": d.get("reason"), "count": 1}
    return GraphFusion(
        compile_id=ev.compile_id,
        graph=ev.graph or "?",
        device=str(ev.device or "?"),
        nodes=nodes,
        groups=groups,
        fused_pairs=list(dict.fromkeys(fused)),
        rejected=list(rejected.values()),
        kernel_uses=_kernel_uses(groups, launched, launches),
    )


def _launch_of(members: list[dict[str, Any]], launches: list[Step]) -> int | None:
    """The first kernel launch that takes one of the group's buffers: where it is computed (a buffer
    is written before a later launch reads it)."""
    buffers = {b for m in members for b in m.get("buffers") or []}
    return next((i for i, step in enumerate(launches) if buffers & set(step.buffers)), None)


def _kernel_uses(groups: list[Group], launched: dict[str, int], launches: list[Step]) -> list[KernelUse]:
    by_kernel: dict[str, list[Group]] = {}
    for grp in groups:
        if grp.kernel and grp.kind != "extern":
            by_kernel.setdefault(grp.kernel, []).append(grp)
    uses = []
    for kernel, shared in by_kernel.items():
        if len(shared) < 2:
            continue
        names = [g.name for g in shared]
        at = sorted({launched[n] for n in names if n in launched})
        rows = [
            {
                "line": launches[i].line,
                "buffers": list(launches[i].buffers),
                "groups": [n for n in names if launched.get(n) == i],
            }
            for i in at
        ]
        uses.append(KernelUse(kernel, "reused" if len(at) > 1 else "combined", names, rows))
    return uses


def _match_kernel(members: list[dict[str, Any]], kernels: list[Kernel]) -> Kernel | None:
    """The generated kernel a group became: by provenance node names, then ops, then user lines."""
    if not kernels:
        return None
    names = {o["node"] for m in members for o in m.get("origins") or []}
    ops = {
        o["op"].split(".")[1] if o["op"].count(".") >= 1 else o["op"]
        for m in members
        for o in m.get("origins") or []
    }
    lines = {(u["file"], u["line"]) for m in members for u in m.get("user_lines") or []}

    def score(k: Kernel) -> tuple[int, int, int]:
        knodes = set(k.origins.get("post_grad_nodes") or []) | set(k.origins.get("source_nodes") or [])
        kops = set(k.fused_ops) | {a.split(".")[1] for a in k.origins.get("aten_ops") or [] if "." in a}
        klines = {(u["file"], u["line"]) for u in k.origins.get("user_lines") or []}
        return (len(names & knodes), len(ops & kops), len(lines & klines))

    best = max(kernels, key=score)
    return best if any(score(best)) or len(kernels) == 1 else None


def to_json(view: FusionView) -> dict[str, Any]:
    return {
        **device_envelope(SCHEMA, view.codegen, view.unavailable),
        "graphs": [g.to_json() for g in view.graphs],
        "kernel_count": view.codegen.kernel_count,
        "kernels": [
            {
                "name": k.name,
                "compile_id": k.compile_id,
                "graph": k.graph,
                "category": decode_name(k.name)[0],
                "fused_ops": k.fused_ops,
            }
            for k in view.codegen.kernels
        ],
    }
