"""The candidate remedies of `tcx fix`: derived from the baseline run's findings, one per change.

Each graph break type with a known config remedy gets one, each shape recompile of a compiled
function's argument gets `mark_dynamic`, `maybe_mark_dynamic` and `torch.compile(shapes_spec=...)` on
that argument and dimension (and the run gets one `dynamic=True` candidate, unless the program
already compiles with it); a recompile on a guard of a symbolic size (dynamic=True or automatic
dynamic made it symbolic) gets `mark_static`; a frame that hit the recompile limit gets
`recompile_limit` raised just above what it needed. A break that needs a code change gets the
mechanical rewrites that fit its code, each run from a copy: a data-dependent `if` as `torch._check`
(a guard clause on a number, core/fix/check_rewrite.py) or `torch.cond` (core/fix/rewrites.py), a
helper Dynamo cannot trace decorated with `nonstrict_trace` / `allow_in_graph`
(core/fix/helper_rewrite.py), a print moved after the compiled call (core/fix/print_rewrite.py, besides
the config remedy); where none fits, what to write, not run. `suppress_errors` is listed, never run, when a
compile failed: it hides failures, it fixes none. A recompile the recompiles view calls expected (grad
mode: training and evaluation each get an entry) is listed as expected and never run.

The order (what `--max-runs` takes first) is the findings' cost in the baseline: each finding's
compile seconds (`cost`, set by core/fix/verify.py from torch's compilation metrics), then its
occurrences; a finding's first remedy comes before any finding's second. A size that a guard ties to
other inputs' sizes (`L['Y'].size()[0] == L['X'].size()[0]`) is marked together with them, never alone,
and `dynamic=True` comes first. The variants of one size made dynamic are one `family`: once one of them
ran and the program failed or the finding stayed, the others use no run.

Pure and torch-free: the runs are core/fix/verify.py's.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tcx.core.analysis.remedies import structural_remedy
from tcx.core.analysis.tied_sizes import KEYWORD_ARG, library_keyword, mark_target
from tcx.core.fix import source_file
from tcx.core.fix.check_rewrite import check_rewrite
from tcx.core.fix.helper_rewrite import helper_rewrites
from tcx.core.fix.print_rewrite import print_rewrite
from tcx.core.fix.rewrites import Rewrite, cond_at

if TYPE_CHECKING:
    from tcx.core.views.explain import BreakSite, Explanation
    from tcx.core.views.recompiles import RecompileReport

DYNAMO_CONFIG = "torch._dynamo.config"


@dataclass(frozen=True)
class ConfigRule:
    """A break type (matched in its type or explanation text) and the config assignment that removes it."""

    needles: tuple[str, ...]
    name: str
    value: Any = True
    add: str | None = None  # "module.attr" of a callable added to the config's set instead of a value

    def change(self) -> str:
        if self.add:
            return f"{DYNAMO_CONFIG}.{self.name}.add({self.add.removeprefix('builtins.')})"
        return f"{DYNAMO_CONFIG}.{self.name} = {self.value!r}"

    def spec(self) -> dict[str, Any]:
        item: dict[str, Any] = {"module": DYNAMO_CONFIG, "name": self.name}
        if self.add:
            item["add"] = self.add
        else:
            item["value"] = self.value
        return item


CONFIG_RULES = (
    ConfigRule(
        ("Tensor.item()", "capture_scalar_outputs", "Data dependent operator"), "capture_scalar_outputs"
    ),
    ConfigRule(
        ("dynamic output shape", "Dynamic shape operator", "capture_dynamic_output_shape_ops"),
        "capture_dynamic_output_shape_ops",
    ),
    ConfigRule(("builtin operator `print`",), "reorderable_logging_functions", add="builtins.print"),
    # torch names `_warnings.warn` (the C function behind warnings.warn): it runs after the graph
    ConfigRule(("`_warnings.warn`",), "reorderable_logging_functions", add="warnings.warn"),
)
# A logging.Logger method call: torch only offers ignore_logging_functions (the call becomes a no-op under
# compile: the message is not logged from compiled code), for the method the break's line calls.
LOGGER_BREAK = "logging.Logger method not supported"
# logging.Logger's own methods only: the fix capture resolves the name before the program runs, so a method
# a library adds on import (transformers' warning_once) cannot be named (bench/advice.py saw it refuted)
LOGGER_METHOD = re.compile(r"\.(debug|info|warning|warn|error|exception|critical|log)\(")
# Breaks whose fix is a change to the program's code: what to write (None: nothing beyond the config
# remedy), and the mechanical rewrites tried on a copy where the code has a shape they know, each
# (site) -> Rewrite, [Rewrite, ...] in order of preference, or why not (core/fix/*rewrite*.py).
CODE_RULES = (
    (
        ("Data-dependent branching",),
        "rewrite the branch with torch.cond(pred, true_fn, false_fn, operands) (both branches "
        "tensor-only) or torch.where(cond, a, b); a guard clause on a number: torch._check(what holds)",
        (check_rewrite, cond_at),
    ),
    (
        ("Attempted to call function marked as skipped", "Unsupported method call"),
        "move the call into a helper decorated with @torch._dynamo.nonstrict_trace (or "
        "@torch.compiler.allow_in_graph), or out of the compiled function",
        (helper_rewrites,),
    ),
    (("builtin operator `print`",), None, (print_rewrite,)),
)


@dataclass(frozen=True)
class Finding:
    kind: str  # graph_break | recompile | recompile_limit
    what: str  # the break type, or the recompile cause
    file: str | None
    line: int | None
    function: str | None
    occurrences: int
    arg: str | None = None
    dim: int | None = None
    compile_ids: tuple[str, ...] = ()  # the compiles it occurred in (a break), or caused (a recompile)
    rank: int | None = None  # a recompile's argument: its number of dimensions (for shapes_spec)
    tied: tuple[tuple[str, int], ...] = ()  # sizes a guard ties to arg's dim: marked with it, never apart
    guard: str | None = None  # a recompile on another guard: the guard's text (the same recompile elsewhere)
    cause: str | None = None  # the recompiles view's cause of a size recompile (duck sizing, a buffer ...)
    call_site: str | None = None  # library code calls the frame: the change at the user's call
    user_names: tuple[tuple[str, str], ...] = ()  # (arg, the user's expression) where their call names it
    user_call: str | None = None  # file:line of that call

    def to_json(self) -> dict[str, Any]:
        site = {"file": self.file, "line": self.line, "function": self.function}
        if self.arg is not None:
            site.update(arg=self.arg, dim=self.dim)
        return {
            "kind": self.kind,
            "what": self.what,
            "occurrences": self.occurrences,
            "site": site,
            "compile_ids": list(self.compile_ids),
        }


@dataclass
class Remedy:
    """One candidate: the finding it targets, the change as code, and how a run applies it."""

    kind: str  # config | dynamism | code | expected (listed, never run)
    change: str
    findings: list[Finding]
    config: list[dict[str, Any]] = field(default_factory=list)  # the fix capture's `config`
    # the fix capture's `marks`: {function, arg, dim, how: dynamic | maybe | static} before each call
    marks: list[dict[str, Any]] = field(default_factory=list)
    # the fix capture's `compile_kwargs`: {function, shapes_spec: {arg: [dims]}} added to torch.compile
    compile_kwargs: list[dict[str, Any]] = field(default_factory=list)
    # the fix capture's `attributes`: {path, value} set on each nn.Module compiled, before it is compiled
    attributes: list[dict[str, Any]] = field(default_factory=list)
    dynamic: bool | None = None  # RunOptions.dynamic (torch.compile(dynamic=True) for every compile)
    runnable: bool = True
    why_not_run: str | None = None
    rewrite: Rewrite | None = None  # a code remedy's rewritten file (run from a copy)
    more_compiles_expected: bool = False  # recompile_limit: more recompiles are the point, not worse
    alternative: int = 0  # 0: the first remedy of its finding; 1, 2, ...: the next ones
    # Variants of one idea (mark_dynamic, maybe_mark_dynamic, shapes_spec of one size): once one ran and
    # the program failed or the finding stayed, the others are not run (core/fix/verify.py).
    family: str | None = None
    cost_s: float = 0.0  # its findings' compile seconds in the baseline (the order's basis)

    @property
    def weight(self) -> int:
        return sum(f.occurrences for f in self.findings)


def candidates(
    ex: Explanation,
    recompiles: RecompileReport,
    already_dynamic: bool,
    missing: dict[str, str] | None = None,
    compile_error: str | None = None,
) -> list[Remedy]:
    """Every remedy the baseline's findings suggest, in no order yet (`order` sorts them).
    `already_dynamic`: the program compiles with dynamic=True already. `missing`: the remedies the
    installed torch lacks (name -> why), listed as not run. `compile_error`: the baseline failed
    with an error torch.compile raised (what it said)."""
    missing = missing or {}
    by_change: dict[str, Remedy] = {}
    for site in ex.sites:
        branch = _add_library_branch(by_change, ex, site)
        _add_break_remedy(by_change, site, missing, runnable_found=branch)
    shape = _shape_recompiles(recompiles)
    for finding in shape:
        for alternative, remedy in enumerate(_shape_remedies(finding, missing), int(_lenient_first(finding))):
            remedy = by_change.setdefault(remedy.change, remedy)
            remedy.alternative = alternative
            remedy.findings.append(finding)
    marked = [f for f in shape if _not_a_mark(f) is None]  # dynamic=True cannot help the others either
    if marked:
        already = already_dynamic
        by_change["dynamic=True"] = Remedy(
            "dynamism",
            "torch.compile(fn, dynamic=True)",
            marked,
            dynamic=True,
            runnable=not already,
            why_not_run="the program already compiles with dynamic=True" if already else None,
            # first where sizes are tied (the marks must then name every tied size), else after the marks
            alternative=0 if any(_lenient_first(f) for f in marked) else 3,
        )
    for finding in _symbolic_recompiles(recompiles):
        call = f"torch._dynamo.mark_static({finding.arg}, {finding.dim})"
        change = f"{call}  # before each call of {finding.function}"
        mark = {"function": finding.function, "arg": finding.arg, "dim": finding.dim, "how": "static"}
        remedy = by_change.setdefault(change, Remedy("dynamism", change, [], marks=[mark]))
        _unavailable(remedy, "mark_static", missing)
        remedy.findings.append(finding)
    for finding, limit in _limit_hits(recompiles):
        config = str(recompiles.limit.get("config") or f"{DYNAMO_CONFIG}.recompile_limit")
        module, _, name = config.rpartition(".")
        change = f"{config} = {limit}"
        remedy = Remedy(
            "config",
            change,
            [finding],
            config=[{"module": module, "name": name, "value": limit}],
            more_compiles_expected=True,
        )
        by_change.setdefault(change, remedy)
    for finding, path, value in _first_call_recompiles(recompiles):
        change = f"model.{'.'.join(path)} = {value!r}  # before torch.compile(model)"
        attribute = {"path": list(path), "value": value}
        remedy = by_change.setdefault(change, Remedy("config", change, [], attributes=[attribute]))
        remedy.findings.append(finding)
    if compile_error:
        by_change["suppress_errors"] = _suppress_errors(compile_error)
    expected = _expected(recompiles)
    if expected is not None:
        by_change[expected.change] = expected
    return list(by_change.values())


def _expected(report: RecompileReport) -> Remedy | None:
    """The recompiles the recompiles view calls expected, listed as nothing to try (never run)."""
    calls = [c for c in report.calls if c.outcome == "recompile" and c.expected]
    if not calls:
        return None
    findings = [
        Finding(
            "recompile",
            f"expected recompile: {c.expected}",
            c.file,
            c.line,
            c.function,
            1,
            compile_ids=(c.compile_id,),
        )
        for c in calls
        if c.compile_id
    ]
    return Remedy(
        "expected",
        "nothing to change: an expected recompile",
        findings,
        runnable=False,
        why_not_run="expected, not a problem (the recompiles view and tcx cost say so): not tried",
    )


def order(remedies: list[Remedy]) -> list[Remedy]:
    """What `--max-runs` takes first: the runnable remedies, each finding's first remedy before any
    finding's second, the costliest findings (compile seconds in the baseline) first, then the most
    occurrences; rewrites after config and dynamism at equal cost."""
    return sorted(
        remedies,
        key=lambda r: (not r.runnable, r.alternative, -round(r.cost_s, 4), r.kind == "code", -r.weight),
    )


def _lenient_first(finding: Finding) -> bool:
    """dynamic=True before the marks: sizes tied by a guard (a mark on one alone raises), or a size the
    library's code receives through its wrapper's **kwargs (a mark raises ConstraintViolationError where
    any frame the tensor reaches specializes it; GPT-2's loss did, on the same tensor passed as labels=)."""
    return bool(finding.tied) or library_keyword(finding.arg or "", finding.file)


def _shape_remedies(finding: Finding, missing: dict[str, str]) -> list[Remedy]:
    """The per-argument remedies of one size recompile, in the order they are tried: one idea (this size
    dynamic), so they share a `family`. Sizes a guard ties to it are marked with it, in one remedy.
    Where the recompiles view found that a mark cannot help, its remedy instead (`_not_a_mark`)."""
    instead = _not_a_mark(finding)
    if instead is not None:
        return instead
    arg, dim, function = finding.arg, finding.dim, finding.function
    family = f"{function}:{arg}:{dim}"
    remedies = []
    user = dict(finding.user_names)  # the user's own names, at the user's call
    before = f"your call at {finding.user_call}" if finding.user_call else f"each call of {function}"
    for how, call in (("dynamic", "mark_dynamic"), ("maybe", "maybe_mark_dynamic")):
        sizes = [(arg, dim), *finding.tied]
        names = [mark_target(a, user) for a, _ in sizes]
        change = "; ".join(f"torch._dynamo.{call}({n}, {d})" for n, (_, d) in zip(names, sizes, strict=True))
        change += f"  # before {before}"
        marks = [{"function": function, "arg": a, "dim": d, "how": how} for a, d in sizes]
        remedy = Remedy("dynamism", change, [], marks=marks, family=family)
        remedies.append(_unavailable(remedy, call, missing))
    if finding.tied or KEYWORD_ARG.fullmatch(arg or ""):  # shapes_spec of every tied argument needs each
        return remedies  # one's rank (the marks say the same); it names parameters, not **kwargs' keys
    rank = finding.rank or 0
    dims = ", ".join(f'ShapeVar("{arg}_{i}")' if i == dim else "STATIC" for i in range(rank))
    change = f'torch.compile({function}, shapes_spec={{"{arg}": TensorSpec([{dims}])}})'
    kwargs = {"function": function, "shapes_spec": {arg: {"rank": rank, "dynamic": [dim]}}}
    spec = Remedy("dynamism", change, [], compile_kwargs=[kwargs], family=family)
    spec = _unavailable(spec, "shapes_spec", missing)
    if not finding.rank and spec.runnable:
        spec.runnable, spec.why_not_run = False, f"the rank of {arg} was not recorded"
    return [*remedies, spec]


def _not_a_mark(finding: Finding) -> list[Remedy] | None:
    """The remedies of a size recompile that marking the size cannot fix (None: marks can): duck sizing
    forced to a constant by a line (a mark makes torch raise ConstraintViolationError there; turning duck
    sizing off is a config tcx fix runs), a size the code specializes, a registered buffer or parameter
    reallocated (torch keeps their sizes static; marks do not apply), or a tensor reached through an
    argument (the fix capture marks the compiled function's own arguments only); and any size of a frame
    that library code calls (generate() calling a compiled forward): its change is at the user's call."""
    from tcx.core.analysis.recompile_remedies import DUCK_CONFIG, DUCK_SIZING, SPECIALIZED_BY_CODE

    arg = finding.arg or "?"
    if finding.call_site:  # library code passes the arguments: the change is at the user's call
        why = "a change at your call site that tcx fix cannot make mechanically, so it was not run (untested)"
        return [Remedy("code", finding.call_site, [], runnable=False, why_not_run=why)]
    if finding.cause == DUCK_SIZING:
        module, _, name = DUCK_CONFIG.rpartition(".")
        config = [{"module": module, "name": name, "value": False}]
        return [Remedy("config", f"{DUCK_CONFIG} = False", [], config=config)]
    if finding.cause == SPECIALIZED_BY_CODE:
        advice = (
            f"make the line that specializes {arg}'s dimension {finding.dim} work for any size (-1 in "
            "view/reshape, sizes read from the tensor itself)"
        )
    elif finding.cause and "reallocated" in finding.cause:
        advice = (
            f"allocate {arg} once at its largest size and reuse it, indexing by position (torch keeps a "
            "module's buffer and parameter sizes static: marks do not apply)"
        )
    elif not arg.isidentifier() and not KEYWORD_ARG.fullmatch(arg):
        advice = (
            f"keep {arg}'s dimension {finding.dim} one size across calls, or mark it dynamic where the "
            "program creates it"
        )
    else:
        return None
    why = "needs a code change tcx fix cannot make mechanically, so it was not run"
    return [Remedy("code", advice, [], runnable=False, why_not_run=why)]


def _unavailable(remedy: Remedy, name: str, missing: dict[str, str]) -> Remedy:
    if name in missing:
        remedy.runnable = False
        remedy.why_not_run = missing[name]
    return remedy


def _suppress_errors(error: str) -> Remedy:
    """Information only: suppress_errors runs a frame whose compile failed eagerly instead of raising;
    the failure stays (hidden), so tcx fix never runs or verifies it."""
    return Remedy(
        "config",
        f"{DYNAMO_CONFIG}.suppress_errors = True",
        [Finding("compile_error", error, None, None, None, 1)],
        runnable=False,
        why_not_run=(
            "listed for information only, never run or verified: suppress_errors runs a frame whose "
            "compile fails eagerly instead of raising, so it hides the failure (and every graph break "
            "that fullgraph=True would raise) instead of removing it"
        ),
    )


def _add_break_remedy(
    by_change: dict[str, Remedy], site: BreakSite, missing: dict[str, str], runnable_found: bool = False
) -> None:
    text = f"{site.gb_type}\n{site.explanation}"
    compile_ids = tuple(dict.fromkeys(o.compile_id for o in site.occurrences if o.compile_id))
    finding = Finding(
        "graph_break",
        site.gb_type,
        site.file,
        site.line,
        site.function,
        len(site.occurrences),
        compile_ids=compile_ids,
    )
    logger_rule = _logger_rule(site) if LOGGER_BREAK in text else None
    for rule in [logger_rule] if logger_rule else CONFIG_RULES:
        if any(n in text for n in rule.needles):
            remedy = by_change.setdefault(
                rule.change(), Remedy("config", rule.change(), [], config=[rule.spec()])
            )
            if runnable_found:  # the module setting targets the library code itself: it goes first
                remedy.alternative = max(remedy.alternative, 1)
            remedy.findings.append(finding)
            configured = True
            break
    else:
        configured = False
    # training-step code (backward(), step(), zero_grad()) has its standard remedy, not a rewrite
    structural = structural_remedy(site.gb_type, site.user_stack)
    library = bool(site.user_stack) and site.user_stack[-1].origin != "user"  # BreakSite.in_library
    rewrites: list[Rewrite] = []
    for needles, advice, rewriters in [] if structural else CODE_RULES:
        if not any(n in text for n in needles):
            continue
        made = [m for r in rewriters for m in _as_list(_bounded(r, site))]
        rewrites = [m for m in made if isinstance(m, Rewrite)]  # a user's helper: decorated on a copy
        for alternative, rewrite in enumerate(rewrites, int(configured)):
            remedy = by_change.setdefault(
                rewrite.line, Remedy("code", rewrite.line, [], rewrite=rewrite, alternative=alternative)
            )
            _unavailable(remedy, rewrite.needs or "", missing)
            remedy.findings.append(finding)
        if advice and not rewrites and not configured and not library:
            whys = "; ".join(m for m in made if isinstance(m, str))
            why = f"needs a code change tcx fix cannot make mechanically ({whys}), so it was not run"
            remedy = by_change.setdefault(advice, Remedy("code", advice, [], runnable=False, why_not_run=why))
            remedy.findings.append(finding)
        break
    if (library or structural) and not configured and not rewrites and not runnable_found:
        # never a change to the library's line: what the user changes where they call it (the text,
        # untested, only where no remedy tcx fix can run was found for the break: the library branch's)
        advice = _call_site_advice(site)
        why = "a change at your call site that tcx fix cannot make mechanically, so it was not run (untested)"
        remedy = by_change.setdefault(advice, Remedy("code", advice, [], runnable=False, why_not_run=why))
        remedy.findings.append(finding)


def _call_site_advice(site: BreakSite) -> str:
    """The explain view's remedy of a break in library code or of training-step code in the compiled
    region (backward(), optimizer.step(), zero_grad()), addressed to the user's line that led there."""
    from tcx.core.analysis.remedies import LIBRARY_REMEDY

    own = site.user_stack[-1] if site.user_stack and not site.in_library else None
    entry = site.entry_frame or own
    if entry is None or not entry.code:
        return f"at your call into {site.file}:{site.line}: {site.suggestion or LIBRARY_REMEDY}"
    file = os.path.relpath(entry.file) if entry.file.startswith(os.getcwd() + os.sep) else entry.file
    at = f"at {file}:{entry.line} (`{entry.code}`)"
    return f"{at}: {site.suggestion or LIBRARY_REMEDY}"


def _add_library_branch(by_change: dict[str, Remedy], ex: Explanation, site: BreakSite) -> bool:
    """The compiled module's attribute set (or method called) before compiling where a library `if` on it
    breaks or transformers' experts loop does (core/analysis/library_branch.py, experts_dispatch.py);
    whether there was one."""
    from tcx.core.analysis.library_branch import module_setting

    found = module_setting(ex.model, site)
    if found is None:
        return False
    remedy = Remedy("config", found.change, [], attributes=[found.attribute])
    remedy = by_change.setdefault(found.change, remedy)
    ids = tuple(dict.fromkeys(o.compile_id for o in site.occurrences if o.compile_id))
    where = (site.file, site.line, site.function, len(site.occurrences))
    finding = Finding("graph_break", site.gb_type, *where, compile_ids=ids)
    remedy.findings.append(finding)
    return True


def _logger_rule(site: BreakSite) -> ConfigRule | None:
    """ignore_logging_functions for the logging.Logger method the break's line calls (`logger.info(`)."""
    frame = site.user_stack[-1] if site.user_stack else None
    code = frame.code if frame else ""
    if not code:
        read = source_file.read(site.file, site.line)
        code = read.lines[site.line - 1] if not isinstance(read, str) and site.line else ""
    m = LOGGER_METHOD.search(code)
    if m is None:
        return None
    return ConfigRule((LOGGER_BREAK,), "ignore_logging_functions", add=f"logging.Logger.{m.group(1)}")


def _bounded(rewriter: Any, site: BreakSite) -> Rewrite | list[Rewrite] | str:
    """The rewriter's answer, or why none when analysing the file took over its budget."""
    try:
        with source_file.budget():
            made: Rewrite | list[Rewrite] | str = rewriter(site)
            return made
    except source_file.OverBudget:
        return f"analysing {site.file} took over {source_file.SECONDS:g} s, the limit for one rewrite"


def _as_list(made: Rewrite | list[Rewrite] | str) -> list[Rewrite | str]:
    return list(made) if isinstance(made, list) else [made]


def _shape_recompiles(report: RecompileReport) -> list[Finding]:
    """One finding per (function, argument, dimension) whose size guard failed: a recompile of a
    compiled function (not of a resume function torch made) on a named argument's dimension."""
    seen: dict[tuple[str, str, int], list[Any]] = {}
    for call in report.calls:
        if call.outcome != "recompile" or not call.failed_guards:
            continue
        guard = call.failed_guards[0]
        if guard.kind != "shape" or guard.arg is None or guard.dim is None:
            continue
        if call.function.startswith("torch_dynamo_resume_in_"):
            continue
        seen.setdefault((call.function, guard.arg, guard.dim), []).append(call)
    return [
        Finding(
            "recompile",
            "shape specialization",
            calls[0].file,
            calls[0].line,
            function,
            len(calls),
            arg,
            dim,
            tuple(c.compile_id for c in calls if c.compile_id),
            _rank(calls[0], arg),
            tuple(dict.fromkeys(t for c in calls for t in c.tied)),
            cause=calls[0].cause,
            call_site=calls[0].call_site,
            user_names=tuple(calls[0].user_names.items()),
            user_call=calls[0].user_call,
        )
        for (function, arg, dim), calls in seen.items()
    ]


def _rank(call: Any, arg: str) -> int | None:
    """The number of dimensions of the call's tensor argument `arg`, as the recompiles capture saw it."""
    for a in call.args or []:
        if a.get("name") == arg and isinstance(a.get("shape"), list):
            return len(a["shape"])
    return None


def _symbolic_recompiles(report: RecompileReport) -> list[Finding]:
    """One finding per (function, argument, dimension) whose guard on a symbolic size failed: the
    dimension was dynamic (dynamic=True, automatic dynamic) and the code branched on its value."""
    seen: dict[tuple[str, str, int], list[Any]] = {}
    for call in report.calls:
        if call.outcome != "recompile" or call.function.startswith("torch_dynamo_resume_in_"):
            continue
        for guard in call.failed_guards[:1]:
            if guard.kind == "dynamic_shape" and guard.arg is not None and guard.dim is not None:
                seen.setdefault((call.function, guard.arg, guard.dim), []).append((call, guard))
    return [
        Finding(
            "recompile",
            f"guard on a symbolic size: {pairs[0][1].guard}",
            pairs[0][1].file or pairs[0][0].file,
            pairs[0][1].line or pairs[0][0].line,
            function,
            len(pairs),
            arg,
            dim,
            tuple(c.compile_id for c, _ in pairs if c.compile_id),
        )
        for (function, arg, dim), pairs in seen.items()
    ]


def _first_call_recompiles(report: RecompileReport) -> list[tuple[Finding, tuple[str, ...], Any]]:
    """Each recompile on `self.<path> is None` where the value is set now (state the code sets on the first
    call), with the value to set before compiling: a Python literal, as the guard failure printed it."""
    import ast

    from tcx.core.analysis.recompile_remedies import set_on_first_call

    seen: dict[str, tuple[list[Any], tuple[str, ...], Any]] = {}
    for call in report.calls:
        guard = call.failed_guards[0] if call.outcome == "recompile" and call.failed_guards else None
        path = set_on_first_call(guard) if guard else None
        if guard is None or path is None:
            continue
        try:
            value = ast.literal_eval(guard.actual or "")
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            continue
        if isinstance(value, (str, int, float, bool)):
            seen.setdefault(guard.guard, ([], path, value))[0].append((call, guard))
    return [
        (
            Finding(
                "recompile",
                f"attribute set on the first call: {text}",
                pairs[0][1].file or pairs[0][0].file,
                pairs[0][1].line or pairs[0][0].line,
                pairs[0][0].function,
                len(pairs),
                compile_ids=tuple(c.compile_id for c, _ in pairs if c.compile_id),
                guard=text,
            ),
            path,
            value,
        )
        for text, (pairs, path, value) in seen.items()
    ]


def _limit_hits(report: RecompileReport) -> list[tuple[Finding, int]]:
    """Each function that hit the recompile limit and ran calls eagerly, with the limit that would
    have kept them compiled: its cache entries plus the calls that fell back (each could need one)."""
    if not report.limit.get("hit"):
        return []
    out = []
    for function in dict.fromkeys(c.function for c in report.eager_calls):
        calls = [c for c in report.calls if c.function == function]
        compiled = [c for c in calls if c.outcome in ("compile", "recompile")]
        eager = [c for c in calls if c.outcome == "eager"]
        first = calls[0]
        finding = Finding(
            "recompile_limit",
            f"recompile limit ({report.limit.get('limit')}) hit: {len(eager)} call(s) ran eagerly",
            first.file,
            first.line,
            function,
            len(eager),
            compile_ids=tuple(c.compile_id for c in compiled if c.compile_id),
        )
        out.append((finding, len(compiled) + len(eager)))
    return out


def break_matches(finding: Finding, sites: set[tuple[str, str | None, int | None]]) -> bool:
    """The same break in another run, whose sites are (type, file, line): its type at its line."""
    return (finding.what, finding.file, finding.line) in sites


def recompile_sites(report: RecompileReport) -> dict[tuple[str, str | None, int | None, bool], str]:
    """Each recompile of a run as (function, argument, dimension, on a symbolic size) -> what it is,
    to see a re-run's new ones."""
    found = [(f, False) for f in _shape_recompiles(report)] + [
        (f, True) for f in _symbolic_recompiles(report)
    ]
    return {
        (f.function or "?", f.arg, f.dim, symbolic): f"{f.what} of {f.arg} dim {f.dim} in {f.function}"
        for f, symbolic in found
    }


def recompile_matches(finding: Finding, report: RecompileReport) -> bool:
    """The same recompile in another run: that function, argument and dimension, on the same kind of
    guard (a size, or a symbolic size); a recompile limit: the function still fell back to eager."""
    if finding.kind == "recompile_limit":
        return any(c.function == finding.function for c in report.eager_calls)
    if finding.guard is not None:  # a recompile on another guard: the same guard failed again
        return any(
            c.outcome == "recompile" and c.failed_guards and c.failed_guards[0].guard == finding.guard
            for c in report.calls
        )
    symbolic = finding.what.startswith("guard on")
    found = _symbolic_recompiles(report) if symbolic else _shape_recompiles(report)
    return any((f.function, f.arg, f.dim) == (finding.function, finding.arg, finding.dim) for f in found)
