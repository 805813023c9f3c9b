"""What a localized divergence is, in words, and the change that fits it (re-run by the pipeline).

From the first probe that found a stage (core/recorder/compat_localize.py): the node's op (a random
one?), its dtype (bfloat16, float16?), torch's bisector's answer (a pass, a config change, a
decomposition, a lowering) and the user's custom passes. Torch-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tcx.core.numerics.report import STAGES, Divergence, Probe, RemedyCheck

INDUCTOR_CONFIG = "torch._inductor.config"
LOW_PRECISION = ("bfloat16", "float16")
CUSTOM_PASSES = (
    "pre_grad_custom_pass",
    "joint_custom_pre_pass",
    "joint_custom_post_pass",
    "post_grad_custom_pre_pass",
    "post_grad_custom_post_pass",
)
RANDOM_WORDS = ("dropout", "rand", "bernoulli", "normal", "multinomial", "rrelu", "exponential")


@dataclass(frozen=True)
class Candidate:
    cause: str
    change: str
    config: tuple[tuple[str, str, Any], ...]  # (module, name, value)

    def remedy(self) -> RemedyCheck:
        return RemedyCheck(
            change=self.change,
            cause=self.cause,
            config=[{"module": m, "name": n, "value": v} for m, n, v in self.config],
        )


def place(divergence: Divergence, probe: Probe) -> None:
    """Fill the divergence's stage, graph, node, line and pass from the probe that found a stage."""
    divergence.stage = probe.stage
    divergence.compile_id = probe.compile_id
    node = probe.node
    if node is not None and node.name:
        divergence.node, divergence.op = node.name, node.op
        divergence.file, divergence.line, divergence.code = node.file, node.line, node.code
    bisect = probe.bisect
    if bisect is not None and bisect.subsystem:
        divergence.pass_name = _pass_name(bisect.subsystem, bisect.debug_info)
        if bisect.backend and bisect.backend != probe.stage:
            divergence.stage = bisect.backend if bisect.backend in STAGES else divergence.stage
    custom = _custom_pass(probe)
    if custom is not None:
        divergence.custom_pass = custom
    divergence.cause, divergence.explanation = explain(divergence, probe)


_OP_REPR = re.compile(r"<OpOverload\(op='([^']+)', overload='([^']+)'\)>")


def readable(debug_info: str | None) -> str | None:
    """torch's bisector's debug info with an op's repr made readable: `aten.native_dropout.default`."""
    return _OP_REPR.sub(lambda m: f"{m[1]}.{m[2]}", debug_info) if debug_info else debug_info


def _pass_name(subsystem: str, debug_info: str | None) -> str:
    """`post_grad_custom_post_pass`; `decomposition: aten.native_dropout.default`."""
    debug_info = readable(debug_info)
    if subsystem.endswith("_passes") and debug_info:
        return debug_info
    if debug_info and debug_info != subsystem:
        return f"{subsystem}: {debug_info}"
    return subsystem


def _custom_pass(probe: Probe) -> dict[str, Any] | None:
    """The user's pass the bisector named, or, with no bisector answer, the only custom pass set."""
    bisect = probe.bisect
    named = bisect.debug_info if bisect and bisect.debug_info in CUSTOM_PASSES else None
    unnamed = bisect is None or not bisect.subsystem
    if named is None and unnamed and len(probe.custom_passes) == 1 and probe.stage == "inductor":
        named = next(iter(probe.custom_passes))
    if named is None or named not in probe.custom_passes:
        return None
    return {"config": named, **probe.custom_passes[named]}


def explain(divergence: Divergence, probe: Probe) -> tuple[str | None, str]:
    """(cause, one paragraph) for the divergence the probe placed."""
    node = probe.node
    bisect = probe.bisect
    where = (
        f"{divergence.op} at line {divergence.line}" if divergence.op and divergence.line else divergence.op
    )
    random = bool(node and node.random) or _mentions_random(bisect.debug_info if bisect else None)
    if divergence.custom_pass:
        cp = divergence.custom_pass
        return "custom_pass", (
            f"your {cp['config']} `{cp.get('function')}` changes what the graph computes"
            + (f": the first value off is {where}" if where else "")
            + ". Fix the pass; without it the compiled values are eager's (see the remedy)."
        )
    if random or (bisect and bisect.subsystem == "inductor_fallback_random"):
        return "random", (
            f"{where or 'a random op'} draws its random numbers differently once compiled: AOTAutograd's "
            "decomposition replaces eager's draw (e.g. bernoulli for dropout) and Inductor generates them "
            "with its own generator. Expected for random ops; torch._inductor.config.fallback_random = True "
            "makes Inductor use eager's."
        )
    emulated = bool(bisect and bisect.subsystem == "inductor_emulate_precision_casts")
    if emulated or (node and node.dtype in LOW_PRECISION and probe.stage == "inductor"):
        return "low_precision", (
            f"{where or 'the graph'} is {node.dtype if node else 'low precision'}: Inductor keeps the "
            "intermediate values of a fused kernel in float32 where eager rounds after each op, beyond "
            "rounding here. torch._inductor.config.emulate_precision_casts = True rounds as eager does."
        )
    if bisect and bisect.subsystem and bisect.subsystem.startswith("inductor_"):
        setting = bisect.subsystem.removeprefix("inductor_")
        return (
            "config",
            f"Inductor's `{setting}` makes the difference (torch's bisector changed it and the values "
            "matched).",
        )
    if bisect and bisect.subsystem == "decomposition":
        return "decomposition", (
            f"the decomposition of {readable(bisect.debug_info) or 'an op'} (AOTAutograd, application "
            f"#{bisect.bisect_number}) computes it differently from eager's kernel. No setting turns one "
            "decomposition off; report it to PyTorch with the op."
        )
    if bisect and bisect.subsystem == "lowerings":
        return "lowering", (
            f"Inductor's lowering of {readable(bisect.debug_info) or 'a node'} (application "
            f"#{bisect.bisect_number}) "
            "computes it differently from eager's kernel; with that node run by eager's kernel the values "
            "match. Report it to PyTorch with the node."
        )
    stage = STAGES.get(probe.stage or "", probe.stage or "?")
    return None, f"the values first differ in {stage}" + (f", at {where}" if where else "") + "."


def _mentions_random(text: str | None) -> bool:
    return bool(text) and any(word in str(text).lower() for word in RANDOM_WORDS)


def candidates(divergence: Divergence, probe: Probe | None) -> list[Candidate]:
    """The changes that fit the divergence, most specific first."""
    out: list[Candidate] = []
    if divergence.custom_pass:
        name = divergence.custom_pass["config"]
        out.append(
            Candidate(
                "custom_pass",
                f"{INDUCTOR_CONFIG}.{name} = None (your pass off: proves it is the cause; then fix the pass)",
                ((INDUCTOR_CONFIG, name, None),),
            )
        )
    if divergence.cause == "random":
        out.append(
            Candidate(
                "random",
                f"{INDUCTOR_CONFIG}.fallback_random = True",
                ((INDUCTOR_CONFIG, "fallback_random", True),),
            )
        )
    if divergence.cause == "low_precision":
        out.append(
            Candidate(
                "low_precision",
                f"{INDUCTOR_CONFIG}.emulate_precision_casts = True",
                ((INDUCTOR_CONFIG, "emulate_precision_casts", True),),
            )
        )
    bisect = probe.bisect if probe else None
    if divergence.cause == "config" and bisect and bisect.subsystem:
        setting = bisect.subsystem.removeprefix("inductor_")
        value = _config_value(setting)
        if value is not None:
            out.append(
                Candidate(
                    "config", f"{INDUCTOR_CONFIG}.{setting} = {value!r}", ((INDUCTOR_CONFIG, setting, value),)
                )
            )
    return out


def _config_value(setting: str) -> Any:
    """The value torch's bisector sets for a config change it names (its BACKENDS table)."""
    known = {
        "fallback_random": True,
        "emulate_precision_casts": True,
        "layout_optimization": False,
        "comprehensive_padding": False,
    }
    return known.get(setting)
