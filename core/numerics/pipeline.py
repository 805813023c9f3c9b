"""`tcx numerics TARGET`: the runs, in order, and the report they add up to.

1. Compare: the program runs eager (compilation off for the whole run), with the float64 twin of every
   value (core/recorder/compat_shadow.py), then as it runs (compiled), both seeded alike. Every
   outermost compiled call's outputs, and with `grads` every backward's gradients and every optimizer
   step's parameters, are kept and judged (core/numerics/compare.py, judge.py).
2. When a value diverges, the program runs eager once more: values a second eager run does not repeat
   bit for bit are the program's own non-determinism, not the compiler's.
3. Localize (with `localize`): the compiled run compares each call with eager's as it returns and
   replays the first divergent call's graphs on their inputs through the stages of torch.compile, to the
   first node and the pass (core/recorder/compat_localize.py). A divergence it could not place (a
   gradient's, a call past the first ones) gets a localization run of its own (counted by `max_runs`);
   when no graph diverges on its own inputs, the program runs with the eager backend (Dynamo alone, a
   run counted too) to see whether Dynamo's capture changes the values.
4. Remedies (a run each, counted by `max_runs`): the change that fits the cause (core/numerics/remedies.py)
   applied before the program starts; verified when every value is then within tolerance and the program
   made the same calls.

Runs are made by a `Runner` the command gives (the CLI's live-run machinery), so this module stays free
of click and the terminal.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tcx.core.numerics import remedies as remedy_rules
from tcx.core.numerics.compare import Kept, compare, load
from tcx.core.numerics.judge import Tolerance
from tcx.core.numerics.report import Divergence, NumericsReport, Probe, RemedyCheck, RunNote, ValueCheck

SEED = 0
DEFAULT_MAX_RUNS = 3


@dataclass(frozen=True)
class RunRequest:
    """One run: its name, the numerics capture's spec file, whether its recording is the one the
    report lives in, and a backend override (None: the program's own)."""

    name: str
    spec_path: str
    purpose: str
    keep: bool = False
    backend: str | None = None


@dataclass
class RunResult:
    """What the runner reports of a finished run."""

    seconds: float | None
    failed: str | None  # how the program ended when not well
    interrupted: bool = False
    probes: list[dict[str, Any]] = field(default_factory=list)  # numerics_probe events
    problems: list[str] = field(default_factory=list)  # captures that could not be installed


Runner = Callable[[RunRequest], RunResult]


@dataclass(frozen=True)
class Options:
    tolerance: Tolerance = field(default_factory=Tolerance)
    grads: bool = True
    max_runs: int = DEFAULT_MAX_RUNS
    localize: bool = True


@dataclass
class _Session:
    runner: Runner
    workdir: Path
    options: Options
    runs: list[RunNote] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    budget: int = 0  # runs left for localizing and remedies
    stopped: bool = False

    def run(self, name: str, purpose: str, spec: dict[str, Any], **request: Any) -> tuple[RunResult, Kept]:
        values = self.workdir / f"{name}.values.pt"
        spec = {"seed": SEED, "grads": self.options.grads, "values": str(values), **spec}
        spec_path = self.workdir / f"{name}.numerics.json"
        spec_path.write_text(json.dumps(spec), encoding="utf-8")
        result = self.runner(RunRequest(name, str(spec_path), purpose, **request))
        kept = load(str(values))
        status = result.failed or ("interrupted" if result.interrupted else "ok")
        self.runs.append(RunNote(name, purpose, result.seconds, status, len(kept.records)))
        self.stopped = self.stopped or result.interrupted
        for problem in result.problems:
            self.notes.append(f"{name} run: {problem}")
        return result, kept


def numerics(runner: Runner, workdir: Path, options: Options) -> NumericsReport:
    session = _Session(runner, workdir, options, budget=options.max_runs)
    tol = options.tolerance
    eager_result, eager = session.run(
        "eager",
        "the program eager (compilation off), every value's float64 twin computed beside it",
        {"role": "eager", "shadow": True},
    )
    if session.stopped:
        return _report(session, "not_compared", [], eager, None)
    compiled_spec: dict[str, Any] = {"role": "compiled"}
    if options.localize:  # the first call that diverges is probed in this very run
        compiled_spec["localize"] = {
            "eager_values": str(workdir / "eager.values.pt"),
            "tolerance": tol.to_json(),
        }
    compiled_result, compiled = session.run(
        "compiled",
        "the program as it runs (compiled), each call compared with eager's as it returns",
        compiled_spec,
        keep=True,
    )
    for what, result, kept in (("eager", eager_result, eager), ("compiled", compiled_result, compiled)):
        if result.failed:
            session.notes.append(
                f"the {what} run failed ({result.failed}): the values it kept before are compared"
            )
        if kept.missing:
            session.notes.append(f"the {what} run: {kept.missing}")
        session.notes += [f"the {what} run could not keep a value: {e}" for e in kept.errors]
    checks = compare(compiled, eager, tol)
    if not checks:
        session.notes.append("no compiled call returned in either run: nothing to compare")
        return _report(session, "not_compared", checks, eager, None)
    if all(c.within for c in checks):
        return _report(session, "within_tolerance", checks, eager, None)
    first = next(c for c in checks if not c.within)
    probes = [Probe.from_event(p) for p in compiled_result.probes]
    found = _placed(probes, first)
    repeatable = None
    if found is None and not session.stopped:  # the program's own non-determinism, or the compiler's?
        _, again = session.run(
            "eager-again", "the program eager once more: does it repeat itself?", {"role": "eager"}
        )
        checks = compare(compiled, eager, tol, again)
        repeatable = not any(c.nondeterministic for c in checks)
    divergent = [c for c in checks if not c.within and not c.nondeterministic]
    if not divergent:
        report = _report(session, "nondeterministic", checks, eager, repeatable)
        report.probes = probes
        report.notes.append(
            "every value that differs also differs between two eager runs of the program (seeded alike): "
            "the program is not deterministic, and the compiler is not blamed for it"
            + (" (the graphs probed compute what eager computes on the same inputs)" if probes else "")
        )
        return report
    first = divergent[0]
    divergence = Divergence(
        first.kind, first.function, first.index, first.worst.label if first.worst else None
    )
    report = _report(session, "diverged", checks, eager, repeatable)
    report.first_divergence = divergence
    report.probes = probes
    if found is not None and found[1] is first:
        session.notes.append(
            f"eager was not run again: graph {found[0].compile_id} of {first.name} diverges at "
            f"{found[0].stage} on its own inputs in one process, so it is the compiler's, whatever the "
            "program's determinism"
        )
        remedy_rules.place(divergence, found[0])
        probe: Probe | None = found[0]
    elif not options.localize or session.budget <= 0 or session.stopped:
        why = "--no-localize" if not options.localize else "the compiled run could not place it; --max-runs"
        divergence.explanation = f"not localized ({why}): the first divergent value is named, not its stage."
        probe = None
    else:
        probe = _localize(session, checks, first, divergence, report)
    report.remedies = _remedies(session, divergence, probe, compiled, eager, divergent)
    report.runs, report.notes = session.runs, session.notes
    return report


def _placed(probes: list[Probe], first: ValueCheck) -> tuple[Probe, ValueCheck] | None:
    """The probe of the first divergent call that found a stage, if the compiled run made one."""
    if first.kind != "call":
        return None
    for probe in probes:
        if probe.stage and (probe.function, probe.index) == (first.function, first.index):
            return probe, first
    return None


def _localize(
    session: _Session,
    checks: list[ValueCheck],
    first: ValueCheck,
    divergence: Divergence,
    report: NumericsReport,
) -> Probe | None:
    """The localization run; then, if no graph diverges on its own inputs, the Dynamo-only run."""
    call = first if first.kind == "call" else _call_before(checks, first)
    if call is None:
        divergence.explanation = "not localized: no compiled call precedes the first divergent value."
        return None
    already = [p for p in report.probes if (p.function, p.index) == (call.function, call.index)]
    if not already:
        session.budget -= 1
        spec = {
            "role": "compiled",
            "localize": {
                "function": call.function,
                "index": call.index,
                "tolerance": session.options.tolerance.to_json(),
            },
        }
        result, _ = session.run("localize", f"localize: {call.name}'s graphs replayed stage by stage", spec)
        already = [Probe.from_event(p) for p in result.probes]
        report.probes += already
    found = next((p for p in already if p.stage), None)
    if found is not None:
        remedy_rules.place(divergence, found)
        return found
    if first.kind != "call":
        divergence.explanation = (
            f"the forward graphs of {call.name} compute what eager computes on their inputs; the first value "
            f"off is a {first.kind} one, so it comes from a backward graph (tcx replays forward graphs only)."
        )
        return None
    if session.budget > 0 and not session.stopped:
        session.budget -= 1
        _, kept = session.run(
            "dynamo",
            "the program with the eager backend (Dynamo alone)",
            {"role": "compiled"},
            backend="eager",
        )
        eager = load(str(session.workdir / "eager.values.pt"))
        dynamo_checks = compare(kept, eager, session.options.tolerance)
        if any(
            not c.within
            for c in dynamo_checks
            if (c.kind, c.function, c.index) == (first.kind, first.function, first.index)
        ):
            divergence.stage, divergence.cause = "dynamo", "dynamo"
            divergence.explanation = (
                "every graph computes what eager computes on its own inputs, yet with the eager backend "
                "(Dynamo alone) the values already differ: Dynamo's capture (a graph break, a guard, the "
                "code it runs around the graphs) changes what the program computes."
            )
            return None
    divergence.explanation = (
        f"every graph of {call.name} computes what eager computes on its own inputs"
        + ("" if not report.probes else f" ({len(report.probes)} probed)")
        + ": not localized to a graph."
    )
    return None


def _call_before(checks: list[ValueCheck], value: ValueCheck) -> ValueCheck | None:
    calls = [c for c in checks if c.kind == "call" and c.seq < value.seq]
    return calls[-1] if calls else None


def _remedies(
    session: _Session,
    divergence: Divergence,
    probe: Probe | None,
    compiled: Kept,
    eager: Kept,
    divergent: list[ValueCheck],
) -> list[RemedyCheck]:
    out = []
    before = _figures(divergent)
    for index, candidate in enumerate(remedy_rules.candidates(divergence, probe), start=1):
        remedy = candidate.remedy()
        remedy.before = before
        out.append(remedy)
        if session.stopped or session.budget <= 0:
            remedy.why_not = "not run: tcx was stopped" if session.stopped else "not run: --max-runs reached"
            continue
        session.budget -= 1
        spec = {"role": "compiled", "config": remedy.config}
        result, kept = session.run(f"remedy-{index}", f"remedy: {candidate.change}", spec)
        remedy.ran = True
        checks = compare(kept, eager, session.options.tolerance)
        off = [c for c in checks if not c.within]
        remedy.after = {**_figures(checks), "divergent": len(off)}
        remedy.after["values_compared"] = sum(len(c.judgements) for c in checks)
        why = []
        if result.failed:
            why.append(f"the program failed with the change: {result.failed}")
        if len(kept.records) != len(compiled.records):
            why.append(f"{len(compiled.records)} records before, {len(kept.records)} with the change")
        if off:
            why.append(f"{len(off)} records still off; the first: {off[0].name}")
        remedy.verified = not why
        remedy.why_not = "; ".join(why) or None
    return out


def _figures(checks: list[ValueCheck]) -> dict[str, Any]:
    worst = max((c.worst for c in checks if c.worst), key=lambda j: j.excess, default=None)
    return {
        "divergent": len(checks),
        "max_abs": max((c.max_abs for c in checks if c.max_abs is not None), default=None),
        "compiled_error": worst.compiled_error if worst else None,
        "allowed_error": worst.allowed_error if worst else None,
    }


def _report(
    session: _Session, verdict: str, checks: list[ValueCheck], eager: Kept, repeatable: bool | None
) -> NumericsReport:
    dropped = dict(eager.dropped)
    if dropped:
        session.notes.append(
            f"values past the memory cap were not kept: {', '.join(f'{k} ×{v}' for k, v in dropped.items())}"
        )
    return NumericsReport(
        verdict=verdict,
        checks=checks,
        tolerance=session.options.tolerance.to_json(),
        grads=session.options.grads,
        seed=SEED,
        eager_repeatable=repeatable,
        reference={"ops": eager.shadow_ops, "fallback_ops": eager.fallback_ops, "dtype": "float64"},
        runs=session.runs,
        notes=session.notes,
        dropped=dropped,
    )
