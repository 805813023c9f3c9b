"""What `tcx numerics` found, as typed facts: each compared value's judgement, the first divergence
(stage, graph, node, line, pass), the remedies re-run, and the runs made. Torch-free.

The command (core/numerics/pipeline.py) writes the report's JSON into the compiled run's recording
as a `numerics_report` event; the view (core/views/numerics.py) reads it back with `from_json`, so
`tcx numerics run.tcx` re-renders what the runs found without running anything.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

VERDICTS = ("within_tolerance", "diverged", "nondeterministic", "not_compared")
# The stages of torch.compile a divergence is placed in, in pipeline order, and what each adds.
STAGES = {
    "dynamo": "Dynamo's capture (the program with the eager backend already differs)",
    "aot_eager": "AOTAutograd (functionalization, the joint graph)",
    "aot_eager_decomp_partition": "AOTAutograd's decompositions and partitioner",
    "inductor": "Inductor (its passes, lowerings and generated kernels)",
}


def _num(value: Any) -> float | None:
    """A number a report may carry: finite and printable (a recording may hold anything its schema admits)."""
    if type(value) not in (int, float):
        return None
    try:
        out = float(value)
    except OverflowError:
        return None
    return out if math.isfinite(out) and abs(out) < 1e300 else None


def _int(value: Any) -> int:
    return value if type(value) is int and abs(value) < 2**62 else 0


def _figures(doc: Any) -> dict[str, Any]:
    """A remedy's before/after figures: counts and errors, each a printable number or None."""
    if not isinstance(doc, dict):
        return {}
    return {
        k: (_int(v) if type(v) is int and k in ("divergent", "values_compared") else _num(v))
        for k, v in doc.items()
    }


def _reference(doc: Any) -> dict[str, Any]:
    doc = doc if isinstance(doc, dict) else {}
    fallback = doc.get("fallback_ops") if isinstance(doc.get("fallback_ops"), dict) else {}
    return {
        "ops": _int(doc.get("ops")),
        "fallback_ops": {str(k): _int(v) for k, v in fallback.items()},
        "dtype": doc.get("dtype"),
    }


def _where(doc: Any) -> dict[str, Any] | None:
    if not isinstance(doc, dict):
        return None
    index = [_int(i) for i in doc.get("index") or [] if type(i) is int]
    out: dict[str, Any] = {
        "index": index,
        **{k: _num(doc.get(k)) for k in ("eager", "compiled", "reference")},
    }
    if isinstance(doc.get("value"), str):
        out["value"] = doc["value"]
    return out


@dataclass
class Judgement:
    """One value (an output, a gradient, a parameter) compiled against eager (core/numerics/judge.py)."""

    label: str
    dtype: str | None
    shape: list[int]
    within: bool
    basis: str  # "float64" | "tolerance" (no reference: torch.testing's) | "exact" | "mismatch"
    max_abs: float | None = None  # max |compiled − eager|
    max_rel: float | None = None  # max_abs / max |eager|
    compiled_error: float | None = None  # RMSE against the float64 reference
    eager_error: float | None = None
    allowed_error: float | None = None
    where: dict[str, Any] | None = None  # the element of max_abs: index, eager, compiled, reference
    note: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Judgement:
        return cls(
            label=str(doc.get("label")),
            dtype=doc.get("dtype"),
            shape=[_int(n) for n in doc.get("shape") or []],
            within=bool(doc.get("within")),
            basis=str(doc.get("basis") or "float64"),
            max_abs=_num(doc.get("max_abs")),
            max_rel=_num(doc.get("max_rel")),
            compiled_error=_num(doc.get("compiled_error")),
            eager_error=_num(doc.get("eager_error")),
            allowed_error=_num(doc.get("allowed_error")),
            where=_where(doc.get("where")),
            note=doc.get("note"),
        )

    @property
    def excess(self) -> float:
        """How far past (> 1) or within (<= 1) what is allowed: compiled error / allowed error."""
        if self.compiled_error is None or not self.allowed_error:
            return 0.0 if self.within else float("inf")
        return self.compiled_error / self.allowed_error


@dataclass
class ValueCheck:
    """One record of the program: a compiled call's outputs, the gradients after a backward pass,
    or the parameters after an optimizer step, each value judged."""

    kind: str  # call | backward | step
    function: str | None
    index: int
    judgements: list[Judgement]
    nondeterministic: bool | None = None  # None: the eager run was not repeated
    eager_spread: float | None = None  # max |eager − eager again|
    note: str | None = None  # why it could not be compared (missing in a run)
    seq: int = 0  # its place among all the records, in the order the program made them

    @property
    def within(self) -> bool:
        return self.note is None and all(j.within for j in self.judgements)

    @property
    def worst(self) -> Judgement | None:
        """The value furthest from what is allowed (a divergent one first), then the largest difference."""
        return max(self.judgements, key=lambda j: (not j.within, j.excess, j.max_abs or 0.0), default=None)

    @property
    def max_abs(self) -> float | None:
        known = [j.max_abs for j in self.judgements if j.max_abs is not None]
        return max(known) if known else None

    @property
    def max_rel(self) -> float | None:
        known = [j.max_rel for j in self.judgements if j.max_rel is not None]
        return max(known) if known else None

    @property
    def name(self) -> str:
        if self.kind == "call":
            return f"{self.function} call {self.index}"
        return f"{'backward' if self.kind == 'backward' else 'optimizer step'} {self.index}"

    def to_json(self) -> dict[str, Any]:
        worst = self.worst
        index_key = {"call": "call", "backward": "backward", "step": "step"}[self.kind]
        return {
            "kind": self.kind,
            "seq": self.seq,
            "function": self.function,
            index_key: self.index,
            "max_abs": self.max_abs,
            "max_rel": self.max_rel,
            "compiled_error": worst.compiled_error if worst else None,
            "eager_error": worst.eager_error if worst else None,
            "allowed_error": worst.allowed_error if worst else None,
            "within_tolerance": self.within,
            "nondeterministic": self.nondeterministic,
            "eager_spread": self.eager_spread,
            "worst": worst.label if worst else None,
            "where": {"value": worst.label, **worst.where} if worst and worst.where else None,
            "note": self.note,
            "values": [j.to_json() for j in self.judgements],
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> ValueCheck:
        kind = str(doc.get("kind") or "call")
        return cls(
            kind=kind,
            function=doc.get("function"),
            index=_int(doc.get(kind)),
            judgements=[Judgement.from_json(j) for j in doc.get("values") or []],
            nondeterministic=doc.get("nondeterministic"),
            eager_spread=_num(doc.get("eager_spread")),
            note=doc.get("note"),
            seq=_int(doc.get("seq")),
        )


@dataclass
class Stage:
    """One rung of the ladder a divergent graph was compiled with, judged against eager."""

    backend: str
    within: bool
    worst: Judgement | None

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Stage:
        worst = doc.get("worst")
        return cls(
            str(doc.get("backend")), bool(doc.get("within")), Judgement.from_json(worst) if worst else None
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "backend": self.backend,
            "within": self.within,
            "worst": self.worst.to_json() if self.worst else None,
        }


@dataclass
class Node:
    """The first FX node of a graph whose value the failing stage computes differently."""

    name: str | None
    op: str | None = None
    file: str | None = None
    line: int | None = None
    code: str | None = None
    dtype: str | None = None
    random: bool = False
    judgement: Judgement | None = None
    checked: int = 0  # intermediate values compared
    why: str | None = None  # when no node was found

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Node:
        judged = doc.get("judgement")
        return cls(
            name=doc.get("name"),
            op=doc.get("op"),
            file=doc.get("file"),
            line=_int(doc.get("line")) or None,
            code=doc.get("code"),
            dtype=doc.get("dtype"),
            random=bool(doc.get("random")),
            judgement=Judgement.from_json(judged) if judged else None,
            checked=_int(doc.get("checked")),
            why=doc.get("why"),
        )

    def to_json(self) -> dict[str, Any]:
        return {**self.__dict__, "judgement": self.judgement.to_json() if self.judgement else None}


@dataclass
class Bisection:
    """torch's CompilerBisector on one graph, with tcx's judgement as its test."""

    backend: str | None = None
    subsystem: str | None = None
    bisect_number: int | None = None
    debug_info: str | None = None
    compiles: int = 0
    note: str | None = None  # unavailable, stopped, failed, or found nothing

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Bisection:
        result = doc.get("result") or {}
        note = doc.get("unavailable") or doc.get("stopped") or doc.get("error")
        if not result and not note:
            note = "torch's bisector found no backend or subsystem that changes the value"
        return cls(
            backend=result.get("backend"),
            subsystem=result.get("subsystem"),
            bisect_number=_int(result.get("bisect_number"))
            if result.get("bisect_number") is not None
            else None,
            debug_info=result.get("debug_info"),
            compiles=_int(doc.get("compiles")),
            note=note,
        )

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Probe:
    """One compiled graph of the divergent call, replayed on its own inputs in the localization run."""

    compile_id: str
    backend: str | None
    stages: list[Stage]
    stage: str | None  # the first stage that diverges; None: every stage computes what eager does
    function: str | None = None  # the divergent call whose graph this is
    index: int | None = None
    node: Node | None = None
    bisect: Bisection | None = None
    custom_passes: dict[str, dict[str, Any]] = field(default_factory=dict)
    seconds: float | None = None
    error: str | None = None

    @classmethod
    def from_event(cls, doc: dict[str, Any]) -> Probe:
        return cls(
            compile_id=str(doc.get("compile_id")),
            backend=doc.get("backend"),
            stages=[Stage.from_json(s) for s in doc.get("stages") or []],
            stage=doc.get("stage"),
            function=doc.get("function"),
            index=_int(doc.get("index")) if doc.get("index") is not None else None,
            node=Node.from_json(doc["node"]) if doc.get("node") else None,
            bisect=Bisection.from_json(doc["bisect"]) if doc.get("bisect") else None,
            custom_passes=dict(doc.get("custom_passes") or {}),
            seconds=_num(doc.get("seconds")),
            error=doc.get("error"),
        )

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Probe:
        probe = cls.from_event({**doc, "node": None, "bisect": None})
        probe.node = Node.from_json(doc["node"]) if doc.get("node") else None
        bisect = doc.get("bisect")
        if isinstance(bisect, dict):
            probe.bisect = Bisection.from_json(
                {
                    "result": bisect if bisect.get("backend") else None,
                    "compiles": bisect.get("compiles"),
                    "error": bisect.get("note"),
                }
            )
        return probe

    def to_json(self) -> dict[str, Any]:
        return {
            "compile_id": self.compile_id,
            "backend": self.backend,
            "stages": [s.to_json() for s in self.stages],
            "stage": self.stage,
            "function": self.function,
            "index": self.index,
            "node": self.node.to_json() if self.node else None,
            "bisect": self.bisect.to_json() if self.bisect else None,
            "custom_passes": self.custom_passes,
            "seconds": self.seconds,
            "error": self.error,
        }


@dataclass
class Divergence:
    """Where the compiled program first stops computing what eager computes."""

    kind: str
    function: str | None
    index: int
    value: str | None  # the output, gradient or parameter judged furthest off
    stage: str | None = None  # a key of STAGES, or None (not localized)
    compile_id: str | None = None
    op: str | None = None
    node: str | None = None
    file: str | None = None
    line: int | None = None
    code: str | None = None
    pass_name: str | None = None  # the pass torch's bisector named (JSON: "pass")
    custom_pass: dict[str, Any] | None = None  # the user's pass: config, function, file, line
    cause: str | None = (
        None  # random | low_precision | custom_pass | decomposition | lowering | config | dynamo
    )
    explanation: str = ""

    def to_json(self) -> dict[str, Any]:
        doc = {k: v for k, v in self.__dict__.items() if k != "pass_name"}
        doc["pass"] = self.pass_name
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Divergence:
        fields = {k: doc.get(k) for k in cls.__dataclass_fields__ if k != "pass_name"}
        fields["index"] = _int(doc.get("index"))
        fields["line"] = _int(doc.get("line")) or None
        fields["explanation"] = str(doc.get("explanation") or "")
        return cls(**fields, pass_name=doc.get("pass"))


@dataclass
class RemedyCheck:
    """A change re-run with the program: verified when every value is then within tolerance."""

    change: str
    cause: str
    config: list[dict[str, Any]]
    ran: bool = False
    verified: bool = False
    before: dict[str, Any] = field(default_factory=dict)  # divergent values, worst compiled error
    after: dict[str, Any] | None = None
    why_not: str | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RemedyCheck:
        return cls(
            change=str(doc.get("change")),
            cause=str(doc.get("cause")),
            config=list(doc.get("config") or []),
            ran=bool(doc.get("ran")),
            verified=bool(doc.get("verified")),
            before=_figures(doc.get("before")),
            after=_figures(doc["after"]) if isinstance(doc.get("after"), dict) else None,
            why_not=doc.get("why_not"),
        )


@dataclass
class RunNote:
    """One run tcx made: what it was for, how long it took, how the program ended."""

    name: str
    purpose: str
    seconds: float | None
    status: str
    records: int | None = None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> RunNote:
        records = doc.get("records")
        return cls(
            str(doc.get("name")),
            str(doc.get("purpose")),
            _num(doc.get("seconds")),
            str(doc.get("status")),
            _int(records) if records is not None else None,
        )


@dataclass
class NumericsReport:
    verdict: str  # one of VERDICTS
    checks: list[ValueCheck]
    tolerance: dict[str, Any]
    grads: bool
    seed: int
    eager_repeatable: bool | None = None
    reference: dict[str, Any] = field(default_factory=dict)  # ops shadowed, fallback ops
    first_divergence: Divergence | None = None
    probes: list[Probe] = field(default_factory=list)
    remedies: list[RemedyCheck] = field(default_factory=list)
    runs: list[RunNote] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    dropped: dict[str, int] = field(default_factory=dict)  # records past the memory cap, per kind

    @property
    def diverged(self) -> bool | None:
        return None if self.verdict == "not_compared" else self.verdict == "diverged"

    def of_kind(self, kind: str) -> list[ValueCheck]:
        return [c for c in self.checks if c.kind == kind]

    @property
    def divergent(self) -> list[ValueCheck]:
        return [c for c in self.checks if not c.within and not c.nondeterministic]

    @property
    def max_abs(self) -> float | None:
        """The largest |compiled − eager| over every value compared (`tcx check --max-numerics-error`)."""
        known = [c.max_abs for c in self.checks if c.max_abs is not None]
        return max(known) if known else None

    def counts(self) -> dict[str, int]:
        return {
            "calls": len(self.of_kind("call")),
            "backward": len(self.of_kind("backward")),
            "steps": len(self.of_kind("step")),
            "values": sum(len(c.judgements) for c in self.checks),
            "divergent": len(self.divergent),
            "nondeterministic": sum(1 for c in self.checks if c.nondeterministic and not c.within),
        }

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "diverged": self.diverged,
            "seed": self.seed,
            "grads": self.grads,
            "tolerance": self.tolerance,
            "reference": self.reference,
            "eager_repeatable": self.eager_repeatable,
            "max_abs": self.max_abs,
            "counts": self.counts(),
            "calls": [c.to_json() for c in self.of_kind("call")],
            "gradients": [c.to_json() for c in self.of_kind("backward")],
            "parameters": [c.to_json() for c in self.of_kind("step")],
            "first_divergence": self.first_divergence.to_json() if self.first_divergence else None,
            "probes": [p.to_json() for p in self.probes],
            "remedies": [r.to_json() for r in self.remedies],
            "runs": [r.to_json() for r in self.runs],
            "notes": self.notes,
            "dropped": self.dropped,
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> NumericsReport:
        checks = [
            ValueCheck.from_json(c)
            for key in ("calls", "gradients", "parameters")
            for c in doc.get(key) or []
        ]
        checks.sort(key=lambda c: c.seq)
        first = doc.get("first_divergence")
        verdict = doc.get("verdict")
        return cls(
            verdict=verdict if verdict in VERDICTS else "not_compared",
            checks=checks,
            tolerance={k: _num((doc.get("tolerance") or {}).get(k)) for k in ("multiplier", "rtol", "atol")},
            grads=bool(doc.get("grads")),
            seed=_int(doc.get("seed")),
            eager_repeatable=doc.get("eager_repeatable"),
            reference=_reference(doc.get("reference")),
            first_divergence=Divergence.from_json(first) if first else None,
            probes=[Probe.from_json(p) for p in doc.get("probes") or []],
            remedies=[RemedyCheck.from_json(r) for r in doc.get("remedies") or []],
            runs=[RunNote.from_json(r) for r in doc.get("runs") or []],
            notes=[str(n) for n in doc.get("notes") or []],
            dropped={str(k): _int(v) for k, v in (doc.get("dropped") or {}).items()},
        )
