"""`tcx fix TARGET`: remedies verified by re-running the program.

The program runs once as it is (the baseline); each finding with a candidate remedy
(core/fix/candidates.py) is re-run in a fresh process with the remedy applied by the `fix` capture
(core/recorder/compat_fix.py: config set, mark_dynamic / maybe_mark_dynamic / mark_static called
before the program's calls, shapes_spec added to its torch.compile call; the user's files are never
touched). Which remedies run first (`--max-runs`) is decided by the findings' cost in the baseline
(`ORDER_BASIS`). A remedy is verified when the re-run shows every finding it
targets gone, nothing worse (no more graph breaks, graphs or recompiles, no new break, the program
did not fail, a steady call not clearly slower) and the compiled calls' outputs equal the
baseline's (core/fix/outputs.py). Every
count is the model's of that run, read from torch's own trace (core/model).

Runs are made by a `Runner` the command gives (the CLI's live-run machinery), so this module
stays free of click and of the terminal.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tcx.core.cost.measurements import read_measurements
from tcx.core.fix.candidates import (
    Finding,
    Remedy,
    break_matches,
    candidates,
    order,
    recompile_matches,
    recompile_sites,
)
from tcx.core.fix.outputs import compare_outputs
from tcx.core.ingest.event_schema import seconds
from tcx.core.model import RunModel
from tcx.core.selection import Selection
from tcx.core.views.envelope import envelope
from tcx.core.views.explain import Explanation, explain
from tcx.core.views.recompiles import RecompileReport, analyze

SCHEMA = "tcx.fix/1"
SEED = 0
DEFAULT_MAX_RUNS = 5
# The captures every run has: the remedy and the outputs (fix), per-call recompiles, calls timed.
RUN_CAPTURES = ("recompiles", "cost=profile=0,warmup=0")
ORDER_BASIS = (
    "the findings' compile seconds in the baseline (torch's compilation metrics of the compiles each "
    "break occurred in, each recompile caused, each frame that hit the recompile limit made), then their "
    "occurrences; each finding's first remedy before any finding's second"
)
# An exception of these types ended the baseline in torch.compile itself (suppress_errors would hide it).
COMPILE_ERRORS = (
    "torch._dynamo.exc",
    "Unsupported",
    "BackendCompilerFailed",
    "InductorError",
    "InternalTorchDynamoError",
    "TorchRuntimeError",
)
MIN_STEADY_CALLS = 3
SLOWER_RATIO = 2.0
SLOWER_MS = 1.0


@dataclass
class Figures:
    graph_breaks: int
    graphs: int
    recompiles: int
    compile_s: float | None
    call_ms: float | None  # median wall time of the steady calls (no compile during them)
    steady_calls: int = 0
    range_ms: tuple[float, float] | None = None  # the fastest and the slowest steady call
    cpu_ms: float | None = None  # median CPU time of the steady calls (the process's, all threads)

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class Run:
    """One finished run: its model, the selected compiles, what it measured, where its outputs are."""

    model: RunModel
    selection: Selection
    ex: Explanation
    recompiles: RecompileReport
    figures: Figures
    outputs: str
    trace_log: str | None = None
    renamed: dict[str, str] = field(default_factory=dict)  # a rewritten copy's path -> the original's
    outputs_repeatable: bool = True  # False: a second run with no remedy returned other outputs
    moved: tuple[str, str] | None = None  # --isolate: (the copy's folder, the program's folder)

    def original(self, path: str | None) -> str | None:
        """A path of this run as the user's: a rewritten copy's, or one in the --isolate copy."""
        if path is None:
            return None
        if path in self.renamed:
            return self.renamed[path]
        if self.moved and (path == self.moved[0] or path.startswith(self.moved[0] + "/")):
            return self.moved[1] + path[len(self.moved[0]) :]
        return path

    def sites(self) -> set[tuple[str, str | None, int | None]]:
        """Each break site as (type, file, line), a copy's path read as the original's."""
        return {(s.gb_type, self.original(s.file), s.line) for s in self.ex.sites}

    @property
    def interrupted(self) -> bool:
        """SIGINT/SIGTERM stopped this run: no further run is started."""
        return self.model.status.program.status == "interrupted"

    @property
    def failed(self) -> str | None:
        """What went wrong, when the program did not end well (an exception, a timeout, a crash)."""
        program = self.model.status.program
        if not program.failed:
            return None
        reason = whole_reason(str(program.message or ""))
        detail = ": ".join(str(p) for p in (program.exc_type, reason) if p)
        return program.status + (f" ({detail[:REASON_CHARS]})" if detail else "")


REASON_CHARS = 1200  # torch's whole reason for a failed re-run, bounded


def whole_reason(message: str) -> str:
    """torch's reason, whole: the first line, the lines that say what was violated (ConstraintViolationError
    lists them as "  - ..."), and the user line torch names under "User stack:" (its last frame and code)."""
    lines = [ln.rstrip() for ln in message.strip().splitlines()]
    if not lines:
        return ""
    out = [lines[0].strip()] + [ln.strip() for ln in lines[1:] if ln.lstrip().startswith("- ")]
    if "User stack:" in lines:
        stack = lines[lines.index("User stack:") + 1 :]
        frames = [i for i, ln in enumerate(stack) if ln.lstrip().startswith('File "')]
        if frames:
            at = frames[-1]
            code = stack[at + 1].strip() if at + 1 < len(stack) else ""
            out.append(f"at {stack[at].strip()}" + (f": {code}" if code else ""))
    return " ".join(out)


@dataclass(frozen=True)
class RunRequest:
    """What the runner is asked to run: a name (for --keep-logs), the fix capture's spec file, and
    the `dynamic=` override (None: the program's own)."""

    name: str
    spec_path: str
    dynamic: bool | None
    baseline: bool
    script: str | None = None  # run this copy of the program instead (a code remedy's rewrite)


# (request) -> (model, selection, trace log dir or None, (copy folder, program folder) under
# --isolate else None); raises on a usage error of the baseline
Runner = Callable[[RunRequest], tuple[RunModel, Selection, str | None, tuple[str, str] | None]]


@dataclass
class Outcome:
    remedy: Remedy
    ran: bool = False
    verified: bool = False
    after: Figures | None = None
    outputs_match: bool | None = None
    outputs_note: str | None = None
    why_not: list[str] = field(default_factory=list)
    trace_log: str | None = None
    after_run: Run | None = None


@dataclass
class FixReport:
    baseline: Run
    outcomes: list[Outcome]
    combined: Outcome | None
    max_runs: int
    seed: int = SEED
    runs_in: str = ""  # where the runs executed (the program's directory, or --isolate's copies)

    @property
    def verified(self) -> list[Outcome]:
        """The verified remedies, most counts removed first, then most compile time saved."""
        ranked = (o for o in self.outcomes if o.verified)
        return sorted(ranked, key=lambda o: _gain(self.baseline.figures, o), reverse=True)


def fix(
    runner: Runner,
    workdir: Path,
    max_runs: int = DEFAULT_MAX_RUNS,
    program: str | None = None,
    missing: dict[str, str] | None = None,
    runs_in: str = "",
) -> FixReport:
    """The baseline, then one re-run per runnable remedy (at most `max_runs`, the costliest findings
    first), then the verified ones combined into one run when there are two or more and a run is
    left. `program`: the script TARGET runs (a code remedy is re-run only when it rewrites that
    file); `missing`: the remedies the installed torch lacks (name -> why)."""
    baseline = _run(runner, workdir, "baseline", None, baseline=True)
    ex = dataclasses.replace(
        baseline.ex, sites=[dataclasses.replace(s, file=baseline.original(s.file)) for s in baseline.ex.sites]
    )
    remedies = candidates(
        ex, baseline.recompiles, compiles_dynamic(baseline.model), missing, _compile_error(baseline)
    )
    for remedy in remedies:
        remedy.findings = [dataclasses.replace(f, file=baseline.original(f.file)) for f in remedy.findings]
        remedy.cost_s = _cost_s(baseline.model, remedy.findings)
    remedies = order(remedies)
    for remedy in remedies:
        if remedy.rewrite and remedy.rewrite.file != program:
            remedy.runnable = False
            remedy.why_not_run = (
                f"the rewrite is in {remedy.rewrite.file}, not in the program TARGET runs; tcx fix re-runs "
                "rewrites of that file only"
            )
    outcomes = [Outcome(r) for r in remedies]
    runs = 0
    stopped = baseline.interrupted
    if baseline.failed and not stopped:  # nothing to compare a re-run with
        for outcome in outcomes:
            outcome.why_not.append(
                outcome.remedy.why_not_run or f"not run: the baseline run failed ({baseline.failed})"
            )
        return FixReport(baseline, outcomes, None, max_runs, runs_in=runs_in)
    # a family of variants -> the change that refuted the idea (named by its change: the rendered list is
    # ranked, verified first, so a number in the try order would point at another remedy)
    refuted: dict[str, str] = {}
    for index, outcome in enumerate(outcomes):
        remedy = outcome.remedy
        if not remedy.runnable:
            outcome.why_not.append(remedy.why_not_run or "not run")
            continue
        if remedy.family in refuted:
            outcome.why_not.append(
                f"not run: a variant of `{refuted[remedy.family]}` (the same size made dynamic), which failed"
            )
            continue
        if stopped or runs >= max_runs:
            outcome.why_not.append(
                "not run: tcx was stopped" if stopped else f"not run: --max-runs {max_runs} reached"
            )
            continue
        runs += 1
        _try(runner, workdir, f"remedy-{index + 1}", remedy, baseline, outcome)
        if remedy.family and _idea_refuted(outcome):
            refuted[remedy.family] = remedy.change.split("  # ", 1)[0]
        stopped = bool(outcome.after_run and outcome.after_run.interrupted)
    if stopped:
        return FixReport(baseline, outcomes, None, max_runs, runs_in=runs_in)
    if any(o.outputs_match is False for o in outcomes) and not _repeatable(runner, workdir, baseline):
        baseline.outputs_repeatable = False
        for o in outcomes:
            if o.after_run is not None:
                _judge(o, baseline, o.after_run)
    report = FixReport(baseline, outcomes, None, max_runs, runs_in=runs_in)
    chosen = _complementary([o.remedy for o in report.verified])
    if len(chosen) >= 2 and runs < max_runs:
        together = _combine(chosen)
        report.combined = Outcome(together)
        _try(runner, workdir, "combined", together, baseline, report.combined)
    return report


def _idea_refuted(outcome: Outcome) -> bool:
    """The re-run refuted the idea, not just this variant: the program failed, or the finding stayed."""
    return outcome.ran and any(
        w.startswith(("the program failed", "the finding stayed")) for w in outcome.why_not
    )


def _cost_s(model: RunModel, findings: list[Finding]) -> float:
    """The compile seconds of the compiles the findings occurred in or caused (each counted once)."""
    ids = dict.fromkeys(cid for f in findings for cid in f.compile_ids)
    known = [model.compiles[cid].compile_time_s for cid in ids if cid in model.compiles]
    return round(sum(s for s in known if s is not None), 4)


def _compile_error(run: Run) -> str | None:
    """What torch.compile raised, when an error of its own ended the run."""
    program = run.model.status.program
    exc_type = str(program.exc_type or "")
    if not program.failed or not any(name in exc_type for name in COMPILE_ERRORS):
        return None
    first = str(program.message or "").strip().splitlines()[:1]
    return ": ".join([exc_type, *first])[:300]


def _complementary(ranked: list[Remedy]) -> list[Remedy]:
    """The verified remedies worth combining: in rank order, each one that targets a finding the
    ones before it do not (mark_dynamic and dynamic=True for the same recompile: the better one)."""
    chosen: list[Remedy] = []
    covered: set[Any] = set()
    for remedy in ranked:
        if remedy.rewrite and any(r.rewrite for r in chosen):
            continue  # two rewrites of one file would have to be merged
        if not set(remedy.findings) <= covered:
            chosen.append(remedy)
            covered.update(remedy.findings)
    return chosen


def _repeatable(runner: Runner, workdir: Path, baseline: Run) -> bool:
    """Does the program return the same outputs when run again with no remedy? Asked once, when a
    remedy's outputs differ: if the program's own outputs differ too (random numbers it draws after
    seeding its own way, the time, a process id), the difference is not the remedy's."""
    try:
        again = _run(runner, workdir, "baseline-again", None, baseline=False)
    except Exception:  # the check could not run: the remedy's outputs stay compared with the baseline's
        return True
    return compare_outputs(baseline.outputs, again.outputs)[0] is not False


def _try(runner: Runner, workdir: Path, name: str, remedy: Remedy, baseline: Run, outcome: Outcome) -> None:
    try:
        after = _run(runner, workdir, name, remedy, baseline=False)
    except Exception as exc:  # one remedy's run failing in tcx says so and the others still run
        outcome.why_not.append(f"the re-run could not be recorded ({type(exc).__name__}: {exc})")
        return
    outcome.ran = True
    outcome.after = after.figures
    outcome.after_run = after
    outcome.trace_log = after.trace_log
    _judge(outcome, baseline, after)


def _judge(outcome: Outcome, baseline: Run, after: Run) -> None:
    """Compare the outputs, then verify (or not) the remedy from the re-run."""
    outcome.outputs_match = None
    if after.failed and not baseline.failed:
        outcome.outputs_note = "could not compare: the program failed with the remedy"
    elif not baseline.outputs_repeatable:
        outcome.outputs_note = (
            "could not compare: two runs of the program with no remedy returned different outputs "
            "(it is not repeatable under one seed)"
        )
    else:
        outcome.outputs_match, outcome.outputs_note = compare_outputs(baseline.outputs, after.outputs)
    outcome.why_not = _why_not(outcome.remedy, baseline, after, outcome.outputs_match, outcome.outputs_note)
    outcome.verified = not outcome.why_not


def compiles_dynamic(model: RunModel) -> bool:
    """Does the program compile with dynamic=True already? Every torch.compile call asks for it, or
    torch's own config in every compile's metrics says so (dynamic=True turns
    assume_static_by_default off)."""
    asked = {str(c.asked.get("dynamic")) for c in model.status.torch_compile_calls}
    if asked == {"True"}:
        return True
    configs = [_json_object(c.metrics.get("dynamo_config")) for c in model.compiles.values()]
    configs = [c for c in configs if c]
    return bool(configs) and all(c.get("assume_static_by_default") is False for c in configs)


def _json_object(text: Any) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _run(runner: Runner, workdir: Path, name: str, remedy: Remedy | None, *, baseline: bool) -> Run:
    outputs = workdir / f"{name}.outputs.pt"
    spec = {
        "config": remedy.config if remedy else [],
        "marks": remedy.marks if remedy else [],
        "compile_kwargs": remedy.compile_kwargs if remedy else [],
        "attributes": remedy.attributes if remedy else [],
        "outputs": str(outputs),
        "seed": SEED,
    }
    spec_path = workdir / f"{name}.fix.json"
    spec_path.write_text(json.dumps(spec), encoding="utf-8")
    copy = None
    if remedy and remedy.rewrite:  # the rewritten program runs from a copy: the user's file stays
        copy = workdir / name / Path(remedy.rewrite.file).name
        copy.parent.mkdir()
        copy.write_bytes(remedy.rewrite.data)  # in the file's own encoding, as Python will read it
    request = RunRequest(
        name, str(spec_path), remedy.dynamic if remedy else None, baseline, str(copy) if copy else None
    )
    model, selection, trace_log, moved = runner(request)
    ex = explain(model, selection)
    report = analyze(model, selection)
    figures = measure(model, selection, ex)
    run = Run(model, selection, ex, report, figures, str(outputs), trace_log, moved=moved)
    if copy and remedy and remedy.rewrite:
        run.renamed = {str(copy): remedy.rewrite.file}
    return run


def measure(model: RunModel, selection: Selection, ex: Explanation) -> Figures:
    """The run's counts (torch's trace, as every view reads them), compile time, steady call time."""
    compile_s = [
        seconds(c.metrics.get("entire_frame_compile_time_s"))
        for c in model.compiles.values()
        if selection.includes(c.compile_id)
    ]
    known = [s for s in compile_s if s is not None]
    calls = [
        c
        for c in read_measurements(model).calls
        if c.measured and (selection.function is None or c.function == selection.function)
    ]
    steady = [c.wall_ns / 1e6 for c in calls]
    cpu = [c.cpu_ns / 1e6 for c in calls if c.cpu_ns is not None]
    return Figures(
        graph_breaks=ex.graph_break_count,
        graphs=ex.graph_count,
        recompiles=ex.recompile_count,
        compile_s=round(sum(known), 4) if known else None,
        call_ms=round(statistics.median(steady), 3) if steady else None,
        steady_calls=len(steady),
        range_ms=(round(min(steady), 3), round(max(steady), 3)) if steady else None,
        cpu_ms=round(statistics.median(cpu), 3) if cpu and len(cpu) == len(steady) else None,
    )


def _why_not(
    remedy: Remedy, baseline: Run, after: Run, outputs_match: bool | None, outputs_note: str | None
) -> list[str]:
    """Why the re-run does not verify the remedy; empty when it does."""
    why = []
    if after.failed and not baseline.failed:
        why.append(f"the program failed with the remedy: {after.failed}")
    after_sites = after.sites()
    for finding in remedy.findings:
        if finding.kind == "graph_break":
            stayed = break_matches(finding, after_sites)
        else:
            stayed = recompile_matches(finding, after.recompiles)
        if stayed:
            where = f"{finding.function or '?'} line {finding.line}" if finding.line else finding.function
            what = f"{finding.what} of {finding.arg} dim {finding.dim}" if finding.arg else finding.what
            why.append(f"the finding stayed: {what} in {where}")
    before, now = baseline.figures, after.figures
    counted = (("graph_breaks", "graph breaks"), ("graphs", "graphs"), ("recompiles", "recompiles"))
    for key, label in counted[:1] if remedy.more_compiles_expected else counted:
        if getattr(now, key) > getattr(before, key):
            why.append(f"more {label} ({getattr(before, key)} → {getattr(now, key)})")
    if not remedy.more_compiles_expected and all(getattr(now, k) >= getattr(before, k) for k, _ in counted):
        # The finding may be gone and another in its place: a recompile of the same frame on another
        # guard (mark_static on torch 2.13 trades a symbolic-size guard for a size mismatch).
        why.append("nothing went down: as many graph breaks, graphs and recompiles as before")
    for gb_type, _file, line in sorted(after_sites - baseline.sites(), key=str):
        why.append(f"a new graph break appeared: {gb_type} at line {line}")
    if not remedy.more_compiles_expected:
        before_recompiles = recompile_sites(baseline.recompiles)
        for key, what in recompile_sites(after.recompiles).items():
            if key not in before_recompiles:
                why.append(f"a new recompile appeared: {what}")
    slower = _slower(before, now)
    if slower:
        why.append(slower)
    if outputs_match is False:
        why.append(f"outputs changed: {outputs_note}")
    return why


def _slower(before: Figures, after: Figures) -> str | None:
    """A steady call at least SLOWER_RATIO times as long (and SLOWER_MS longer), each median taken
    over MIN_STEADY_CALLS calls or more, the ranges apart (the re-run's fastest call slower than the
    baseline's slowest), and SLOWER_RATIO times the CPU time where both runs recorded it; fewer calls,
    overlapping ranges, or a call that only waited longer are not enough to judge on a busy machine (the
    suite saw a re-run 12 times slower than its baseline, every call, while other tests compiled)."""
    if before.call_ms is None or after.call_ms is None:
        return None
    if min(before.steady_calls, after.steady_calls) < MIN_STEADY_CALLS:
        return None
    if after.call_ms < SLOWER_RATIO * before.call_ms or after.call_ms - before.call_ms < SLOWER_MS:
        return None
    # on a busy machine one run's calls can all be slow: only calls slower than every baseline call count
    if before.range_ms and after.range_ms and after.range_ms[0] <= before.range_ms[1]:
        return None
    # and only calls that used more CPU: a run that waited for a busy machine's cores did not
    if before.cpu_ms is not None and after.cpu_ms is not None and after.cpu_ms < SLOWER_RATIO * before.cpu_ms:
        return None
    return (
        f"slower: {before.call_ms} → {after.call_ms} ms per steady call (median of {before.steady_calls} → "
        f"{after.steady_calls} calls; the fastest after, {after.range_ms[0] if after.range_ms else '?'} ms, "
        "is slower than every call before)"
    )


def _combine(remedies: list[Remedy]) -> Remedy:
    """One remedy that applies them all (`_complementary` keeps at most one code rewrite)."""
    dynamic = True if any(r.dynamic for r in remedies) else None
    return Remedy(
        "combined",
        "\n".join(r.change for r in remedies),
        list(dict.fromkeys(f for r in remedies for f in r.findings)),
        config=[c for r in remedies for c in r.config],
        marks=[m for r in remedies for m in r.marks],
        compile_kwargs=[k for r in remedies for k in r.compile_kwargs],
        attributes=[a for r in remedies for a in r.attributes],
        dynamic=dynamic,
        rewrite=next((r.rewrite for r in remedies if r.rewrite), None),
        more_compiles_expected=any(r.more_compiles_expected for r in remedies),
    )


def _gain(before: Figures, outcome: Outcome) -> tuple[int, float]:
    after = outcome.after
    if after is None:
        return (0, 0.0)
    removed = (before.graph_breaks - after.graph_breaks) + (before.graphs - after.graphs)
    removed += before.recompiles - after.recompiles
    saved = (before.compile_s or 0.0) - (after.compile_s or 0.0)
    return (removed, round(saved, 4))


def to_json(report: FixReport) -> dict[str, Any]:
    base = report.baseline
    doc = envelope(SCHEMA, base.model, base.selection)
    before = base.figures.to_json()
    doc.update(
        seed=report.seed,
        outputs_repeatable=base.outputs_repeatable,
        max_runs=report.max_runs,
        runs_in=report.runs_in,
        order={"basis": ORDER_BASIS, "remedies": "remedies[] is in this order; --max-runs takes the first"},
        before=before,
        baseline_trace_log=base.trace_log,
        remedies=[_outcome_json(o, before) for o in report.outcomes],
        ranked=[report.outcomes.index(o) for o in report.verified],
        combined=_outcome_json(report.combined, before) if report.combined else None,
    )
    return doc


def _outcome_json(o: Outcome, before: dict[str, Any]) -> dict[str, Any]:
    r = o.remedy
    first = r.findings[0].to_json() if r.findings else None
    return {
        "finding": {"kind": first["kind"], "what": first["what"], "site": first["site"]} if first else None,
        "findings": [f.to_json() for f in r.findings],
        "change": r.change,
        "kind": r.kind,
        "cost_s": r.cost_s,
        "ran": o.ran,
        "verified": o.verified,
        "before": before,
        "after": o.after.to_json() if o.after else None,
        "outputs_match": o.outputs_match,
        "outputs_note": o.outputs_note,
        "patch": r.rewrite.patch if r.rewrite else None,
        "why_not": "; ".join(o.why_not) if o.why_not else None,
        "trace_log": o.trace_log,
    }
