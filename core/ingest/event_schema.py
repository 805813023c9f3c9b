"""The shape of every event tcx reads, checked once where a recording or a log is loaded.

Recordings and TORCH_TRACE logs are input from anywhere: a field of the wrong type (a `rank`
that is an object, a `user_stack` frame without its line) must not reach the model and the
views, which rely on these types. `event_problem` (a recording's event) and `trace_problem` (a
log record's metadata) name the first field that does not fit; the loaders report the event
with its file and line and skip it. Fields a spec does not
name are not checked (new torch and recorder fields pass through); fields it names may be
absent unless required, and are null only where the spec says so.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from typing import Any

# Malformed events reported one by one per file; the rest are counted.
MAX_REPORTED = 20
# A JSON escape of a UTF-16 surrogate (`\\ud800`): decoded alone it cannot be printed as UTF-8.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def decode_json(line: str) -> Any:
    """`json.loads`, with lone surrogates kept visibly escaped (as the recorder writes them: `\\udcff`).

    Raises ValueError (RecursionError included) for a line that is not JSON."""
    try:
        value = json.loads(line)
        return _no_surrogates(value) if _SURROGATE_ESCAPE.search(line) else value
    except RecursionError:
        raise ValueError("nested too deeply") from None


def _no_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", value)
    if isinstance(value, list):
        return [_no_surrogates(v) for v in value]
    if isinstance(value, dict):
        return {_no_surrogates(k): _no_surrogates(v) for k, v in value.items()}
    return value


# A duration above this (a year) is not one; a log may hold any number where torch writes a time.
MAX_SECONDS = 365 * 24 * 3600.0


def seconds(value: Any, scale: float = 1.0) -> float | None:
    """`value * scale` as a duration in seconds, where a view uses one: None unless it is a finite
    number from 0 to MAX_SECONDS (the schema admits NaN, negatives and 300-digit integers)."""
    if type(value) not in (int, float):
        return None
    try:
        result = float(value) * scale
    except OverflowError:
        return None
    return result if math.isfinite(result) and 0 <= result <= MAX_SECONDS else None


# What is wrong with a value: the path to it (innermost first; built only on failure) and why.
Wrong = tuple[list[str], str]


class Spec:
    """A check of one JSON value: `check(value)` is None when it fits, else what is wrong where."""

    def check(self, value: Any) -> Wrong | None:
        raise NotImplementedError


def _kind_of(value: Any) -> str:
    kinds = {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list"}
    if value is None:
        return "null"
    return kinds.get(type(value)) or ("an object" if isinstance(value, dict) else type(value).__name__)


def _wrong(value: Any, expected: str) -> Wrong:
    return [], f"is {_kind_of(value)}, expected {expected}"


class Scalar(Spec):
    """A value of one of `types` (exact JSON types: a boolean is not an integer), or null if allowed."""

    def __init__(self, name: str, *types: type, nullable: bool = False) -> None:
        self.name, self.types, self.nullable = name, frozenset(types), nullable

    def check(self, value: Any) -> Wrong | None:
        if type(value) in self.types or (value is None and self.nullable):
            return None
        return _wrong(value, self.name)


STR = Scalar("a string", str)
INT = Scalar("an integer", int)
BOOL = Scalar("a boolean", bool)
DICT = Scalar("an object", dict)
ANY_SCALAR = Scalar("a string, number, boolean or null", str, int, float, bool, nullable=True)
OSTR = Scalar("a string or null", str, nullable=True)
OINT = Scalar("an integer or null", int, nullable=True)
ONUM = Scalar("a number or null", int, float, nullable=True)
OBOOL = Scalar("a boolean or null", bool, nullable=True)


class OneOf(Spec):
    """One of a few strings (views look them up, e.g. a call's outcome names its style)."""

    def __init__(self, *values: str) -> None:
        self.values = frozenset(values)

    def check(self, value: Any) -> Wrong | None:
        if type(value) is str and value in self.values:
            return None
        return [], f"is {value!r:.40}, expected one of {', '.join(sorted(self.values))}"


def _split(fields: dict[str, Spec]) -> tuple[dict[str, tuple[frozenset[type], bool, str]], dict[str, Spec]]:
    """Scalar fields as (types, nullable), checked inline (this runs for every field of every
    event of a large log), and the other fields' specs."""
    scalars = {n: (f.types, f.nullable, f.name) for n, f in fields.items() if isinstance(f, Scalar)}
    return scalars, {n: f for n, f in fields.items() if not isinstance(f, Scalar)}


class Obj(Spec):
    """An object whose named fields fit their specs; `required` fields must be present."""

    def __init__(self, nullable: bool = False, required: tuple[str, ...] = (), **fields: Spec) -> None:
        self.fields, self.required, self.nullable = fields, required, nullable
        self._scalars, self._compound = _split(fields)

    @classmethod
    def of(cls, fields: dict[str, Spec], nullable: bool = False, required: tuple[str, ...] = ()) -> Obj:
        """An object of fields given as a dict: shared field lists, and names Python reserves (`pass`)."""
        return cls(nullable, required, **fields)

    def check(self, value: Any) -> Wrong | None:
        if type(value) is not dict:
            return None if value is None and self.nullable else _wrong(value, "an object")
        for name in self.required:
            if name not in value:
                return [name], "is missing"
        scalars, compound = self._scalars, self._compound
        for name, item in value.items():
            fits = scalars.get(name)
            wrong: Wrong | None
            if fits is not None:
                if type(item) in fits[0] or (item is None and fits[1]):
                    continue
                wrong = _wrong(item, fits[2])
            else:
                spec = compound.get(name)
                wrong = spec.check(item) if spec is not None else None
                if wrong is None:
                    continue
            wrong[0].append(name)
            return wrong
        return None


class Seq(Spec):
    """A list whose every item fits `item`."""

    def __init__(self, item: Spec, nullable: bool = False) -> None:
        self.item, self.nullable = item, nullable

    def check(self, value: Any) -> Wrong | None:
        if type(value) is not list:
            return None if value is None and self.nullable else _wrong(value, "a list")
        spec = self.item
        if isinstance(spec, Scalar):
            types, nullable = spec.types, spec.nullable
            for i, item in enumerate(value):
                if not (type(item) in types or (item is None and nullable)):
                    return [f"[{i}]"], _wrong(item, spec.name)[1]
            return None
        for i, item in enumerate(value):
            wrong = spec.check(item)
            if wrong is not None:
                wrong[0].append(f"[{i}]")
                return wrong
        return None


class Map(Spec):
    """An object used as a mapping: every value fits `value`."""

    def __init__(self, value: Spec, nullable: bool = False) -> None:
        self.value, self.nullable = value, nullable

    def check(self, value: Any) -> Wrong | None:
        if type(value) is not dict:
            return None if value is None and self.nullable else _wrong(value, "an object")
        for key, item in value.items():
            wrong = self.value.check(item)
            if wrong is not None:
                wrong[0].append(f"[{key!r}]")
                return wrong
        return None


class Lazy(Spec):
    """A spec defined later (a recursive one)."""

    def __init__(self, get: Callable[[], Spec]) -> None:
        self.get = get

    def check(self, value: Any) -> Wrong | None:
        return self.get().check(value)


def describe(wrong: Wrong, root: str = "") -> str:
    """`md.dynamo_start.stack[0].line` is a string, expected an integer or null."""
    path = root
    for part in reversed(wrong[0]):
        path = path + part if part.startswith("[") or not path else f"{path}.{part}"
    return f"`{path}` {wrong[1]}" if path else f"the record {wrong[1]}"


# ------------------------------------------------------------------ recorder events

# A user-code frame as the recorder writes it (graph-break hook, frames torch reports).
USER_FRAME = Obj(required=("file", "line", "name"), file=STR, line=OINT, name=STR, code=OSTR)
# One argument of a call, as core/recorder/compat_recompiles.describe_value writes it.
ARG: Spec = Obj(
    name=STR,
    kind=STR,
    shape=Seq(INT),
    dtype=STR,
    device=STR,
    requires_grad=BOOL,
    value=OSTR,
    type=STR,
    items=Seq(Lazy(lambda: ARG)),
)
CONFIG = Obj(nullable=True, limit=OINT, config=OSTR)
GUARD_RESULT = Obj(compile_id=STR, passed=BOOL, failed=Seq(STR), actual=Map(ANY_SCALAR))
NODE = Obj(required=("name",), name=STR, op=OSTR, target=OSTR, created_as=STR, erased=BOOL, subgraph=BOOL)
SHAPE_GUARD = Obj(expr=ANY_SCALAR, where=ANY_SCALAR)
INSTRUCTION = Obj(
    depth=INT,
    function=OSTR,
    file=OSTR,
    line=OINT,
    offset=OINT,
    opname=OSTR,
    argval=ANY_SCALAR,
    argrepr=OSTR,
    stack=Seq(STR),
    guards=Seq(STR),
    nodes=Seq(NODE),
    shape_guards=Seq(SHAPE_GUARD),
    branch=Obj(nullable=True, condition=ANY_SCALAR, jumped=OBOOL),
    graph_break=Obj(nullable=True, reason=OSTR, gb_type=OSTR),
    exc=OSTR,
)
DIS_ROW = Obj(required=("offset", "opname"), offset=INT, opname=STR, argrepr=OSTR, line=OINT, target=BOOL)
GUARD = Obj(kind=OSTR, source=OSTR, origin=OSTR, text=Seq(STR), file=OSTR, line=OINT, code=OSTR)
USER_LINE = Obj(required=("file", "line"), file=STR, line=OINT, function=OSTR, code=OSTR)
FUSION_NODE = Obj(
    required=("name",),
    name=STR,
    type=OSTR,
    kind=OSTR,
    origins=Seq(Obj(required=("node", "op"), node=STR, op=STR)),
    user_lines=Seq(USER_LINE),
    buffers=Seq(STR),
    size=Seq(ANY_SCALAR),
    kernel=OSTR,
)
DECISION = Obj(required=("node1", "node2"), kind=OSTR, node1=STR, node2=STR, reason=OSTR)
# One call of a compiled callable, timed by `tcx cost` (`cost_run_call`: in another run of the same
# program, `run` says which; `cost_eager_call`: the eager run of a recording made before runs were numbered).
COST_CALL = Obj(
    required=("index", "wall_ns"),
    index=INT,
    function=OSTR,
    file=OSTR,
    line=OINT,
    start_ns=OINT,
    wall_ns=INT,
    cpu_ns=OINT,  # the process's CPU time during the call (all its threads)
    profiler_ns=OINT,
    mode=OSTR,
    warmup=BOOL,
    profiled=BOOL,
    raised=BOOL,
    compiled=Seq(STR, nullable=True),
    wraps=OSTR,
    run=OINT,
)
# What a step does besides its compiled calls, timed: a backward, an optimizer step, a call of the
# program's step function (`--step FUNC`).
COST_SPAN = Obj(
    required=("span", "start_ns", "wall_ns"),
    span=STR,
    start_ns=INT,
    wall_ns=INT,
    name=OSTR,
    index=OINT,
    mode=OSTR,
    warmup=OBOOL,
    profiled=OBOOL,
    raised=OBOOL,
    run=OINT,
    file=OSTR,
    line=OINT,
)
COST_COMPILE = Obj(required=("start_ns",), start_ns=INT, what=OSTR, run=OINT)
# A `cost_profile` extra: [span index, {bytes, flops, ...}].
ANY_SCALAR_OR_OBJECT = Scalar("a number or an object", int, dict)
# `tcx numerics` (core/numerics/report.py): the report the parent writes into the compiled run's recording.
NUMERICS_WHERE = Obj(nullable=True, value=OSTR, index=Seq(INT), eager=ONUM, compiled=ONUM, reference=ONUM)
NUMERICS_FIELDS: dict[str, Spec] = dict(
    label=STR,
    dtype=OSTR,
    shape=Seq(INT),
    within=BOOL,
    basis=OSTR,
    max_abs=ONUM,
    max_rel=ONUM,
    compiled_error=ONUM,
    eager_error=ONUM,
    allowed_error=ONUM,
    where=NUMERICS_WHERE,
    note=OSTR,
)
JUDGEMENT = Obj.of(NUMERICS_FIELDS, required=("label",))
JUDGEMENT_OR_NULL = Obj.of(NUMERICS_FIELDS, nullable=True, required=("label",))
VALUE_CHECK = Obj(
    required=("kind",),
    kind=OneOf("call", "backward", "step"),
    seq=INT,
    function=OSTR,
    call=INT,
    backward=INT,
    step=INT,
    nondeterministic=OBOOL,
    eager_spread=ONUM,
    note=OSTR,
    values=Seq(JUDGEMENT),
)
NUMERICS_NODE = Obj(
    nullable=True,
    name=OSTR,
    op=OSTR,
    file=OSTR,
    line=OINT,
    code=OSTR,
    dtype=OSTR,
    random=BOOL,
    judgement=JUDGEMENT_OR_NULL,
    checked=INT,
    why=OSTR,
)
NUMERICS_PROBE = Obj(
    compile_id=STR,
    function=OSTR,
    index=OINT,
    backend=OSTR,
    stages=Seq(Obj(required=("backend",), backend=STR, within=BOOL, worst=JUDGEMENT_OR_NULL)),
    stage=OSTR,
    node=NUMERICS_NODE,
    bisect=Obj(
        nullable=True,
        backend=OSTR,
        subsystem=OSTR,
        bisect_number=OINT,
        debug_info=OSTR,
        compiles=INT,
        note=OSTR,
    ),
    custom_passes=Map(Obj(function=OSTR, file=OSTR, line=OINT)),
    seconds=ONUM,
    error=OSTR,
)
NUMERICS_FIGURES = Obj(
    nullable=True, divergent=INT, max_abs=ONUM, compiled_error=ONUM, allowed_error=ONUM, values_compared=INT
)
NUMERICS_REPORT = Obj(
    required=("verdict",),
    verdict=OneOf("within_tolerance", "diverged", "nondeterministic", "not_compared"),
    seed=INT,
    grads=BOOL,
    tolerance=Obj(multiplier=ONUM, rtol=ONUM, atol=ONUM),
    reference=Obj(ops=INT, fallback_ops=Map(INT), dtype=OSTR),
    eager_repeatable=OBOOL,
    calls=Seq(VALUE_CHECK),
    gradients=Seq(VALUE_CHECK),
    parameters=Seq(VALUE_CHECK),
    first_divergence=Obj.of(
        {
            "kind": OSTR,
            "function": OSTR,
            "index": INT,
            "value": OSTR,
            "stage": OSTR,
            "compile_id": OSTR,
            "op": OSTR,
            "node": OSTR,
            "file": OSTR,
            "line": OINT,
            "code": OSTR,
            "custom_pass": Obj(nullable=True, config=OSTR, function=OSTR, file=OSTR, line=OINT),
            "cause": OSTR,
            "explanation": OSTR,
            "pass": OSTR,
        },
        nullable=True,
    ),
    probes=Seq(NUMERICS_PROBE),
    remedies=Seq(
        Obj(
            change=STR,
            cause=STR,
            config=Seq(Obj(required=("module", "name"), module=STR, name=STR)),
            ran=BOOL,
            verified=BOOL,
            before=NUMERICS_FIGURES,
            after=NUMERICS_FIGURES,
            why_not=OSTR,
        )
    ),
    runs=Seq(Obj(name=STR, purpose=STR, seconds=ONUM, status=STR, records=OINT)),
    notes=Seq(STR),
    dropped=Map(INT),
)
# Kinds the recorder writes as `{"hook_error": ...}` alone when its hook failed; views skip them.
HOOK_ERROR_KINDS = frozenset({"graph_break", "frame_call", "guard_check", "cost_call"})
# Fields every recorder event kind may carry; `kind` itself is checked first.
COMMON = {"compile_id": OSTR, "attempt": OINT, "error": OSTR, "hook_error": OSTR}

RECORDER_EVENTS: dict[str, Obj] = {
    "run_start": Obj(
        torch_version=OSTR,
        backend=OSTR,
        backend_reason=OSTR,  # recordings made before tcx ran programs with their own backend
        caches=OSTR,
        features=Map(ANY_SCALAR, nullable=True),
    ),
    "compile_stack": Obj(required=("stack",), stack=Seq(USER_FRAME)),
    "trace": Obj(required=("md",), md=DICT, payload=OSTR),
    "graph_break": Obj(
        gb_type=OSTR, gb_id=OSTR, frame=OSTR, frame_file=OSTR, reason=OSTR, user_stack=Seq(USER_FRAME)
    ),
    "compile_call": Obj(asked=DICT, used=DICT, target=OSTR, file=OSTR, line=OINT),
    "compile_seen": Obj(required=("compile_id",)),
    "call": Obj(index=INT, function=OSTR, args=Seq(STR), kwargs=Map(STR)),  # "8x16:float32"
    "log": Obj(logger=OSTR, level=OSTR, message=OSTR),
    "program_exit": Obj(
        status=OSTR,
        exit_code=OINT,
        exc_type=OSTR,
        message=OSTR,
        traceback=OSTR,
        frames=Seq(USER_FRAME, nullable=True),
        file=OSTR,
        line=OINT,
    ),
    "outcome": Obj(
        returncode=OINT,
        signal=OSTR,
        timed_out=OBOOL,
        timeout_s=ONUM,
        interrupted=OBOOL,
        interrupted_by=OSTR,
        wall_s=ONUM,
        output_tail=Seq(STR, nullable=True),
    ),
    # The text taken at record time, or (a file too large to embed) only its sha256.
    "source": Obj(required=("file",), file=STR, text=STR, sha256=STR),
    "recompile_config": Obj(limit=OINT, config=OSTR),
    "frame_call": Obj(
        required=("outcome",),
        index=INT,
        function=OSTR,
        file=OSTR,
        line=OINT,
        outcome=OneOf("compile", "hit", "recompile", "eager"),
        entry=OSTR,
        checked=Seq(STR, nullable=True),
        args=Seq(ARG, nullable=True),
        entries_after=Seq(STR, nullable=True),
        config=CONFIG,
        dropped_before=INT,
        wraps=OSTR,
    ),
    "frame_calls_dropped": Obj(count=INT, by_entry=Map(INT), final=BOOL),
    "guard_check": Obj(
        function=OSTR,
        file=OSTR,
        line=OINT,
        top_level=BOOL,
        args=Seq(ARG, nullable=True),
        results=Seq(GUARD_RESULT, nullable=True),
    ),
    "what_if": Obj(
        index=INT,
        spec=Seq(DICT, nullable=True),
        function=OSTR,
        args=Seq(ARG, nullable=True),
        results=Seq(GUARD_RESULT, nullable=True),
        config=CONFIG,
    ),
    "trace_instructions": Obj(
        function=OSTR,
        file=OSTR,
        firstlineno=OINT,
        instructions=Seq(INSTRUCTION, nullable=True),
        elided=OINT,
        unattributed_nodes=Seq(STR, nullable=True),
    ),
    "bytecode": Obj(
        function=OSTR,
        file=OSTR,
        firstlineno=OINT,
        original=Seq(DIS_ROW, nullable=True),
        transformed=Seq(DIS_ROW, nullable=True),
        transformed_source=OSTR,
        transformed_how=OSTR,
        original_source=OSTR,
        original_how=OSTR,
        calls=Seq(STR, nullable=True),
    ),
    "guards": Obj(
        function=OSTR,
        file=OSTR,
        firstlineno=OINT,
        guards=Seq(GUARD, nullable=True),
        shape_env_guards=Seq(SHAPE_GUARD, nullable=True),
        epilogue=Seq(STR, nullable=True),
        tree=OSTR,
    ),
    "cache_entries": Obj(function=OSTR, file=OSTR, firstlineno=OINT, compile_ids=Seq(STR, nullable=True)),
    "fusion": Obj(
        graph=OSTR,
        device=OSTR,
        preview=OBOOL,
        nodes=Seq(FUSION_NODE, nullable=True),
        groups=Seq(Obj(required=("name",), name=STR, type=OSTR, members=Seq(STR)), nullable=True),
        decisions=Seq(DECISION, nullable=True),
    ),
    "fusion_note": Obj(graph=OSTR, kind=OSTR, node1=OSTR, node2=OSTR, reason=OSTR),
    "partitioner_log": Obj(message=OSTR),
    "cuda_preview": Obj(
        arch=OSTR,
        graph=OSTR,
        source=OSTR,
        ptx=Map(STR, nullable=True),
        seconds=ONUM,
        devices=Seq(STR, nullable=True),
    ),
    "cuda_preview_decision": Obj(decision=OSTR, graph=OSTR, assumed=OSTR, why=OSTR),
    "cuda_preview_note": Obj(note=OSTR),
    # tcx cost (core/recorder/compat_cost.py): calls timed, steady calls profiled
    "cost_config": Obj(
        mode=OSTR,
        profile_calls=INT,
        warmup=INT,
        clock=OSTR,
        stance=OSTR,
        kernel_profile=OSTR,
        graph_marks=OSTR,
        compile_signal=OSTR,
        profiler=OSTR,
        backward=OSTR,
        optimizer=OSTR,
        step=OSTR,
        profiler_error=OSTR,
    ),
    "cost_call": COST_CALL,
    "cost_span": COST_SPAN,
    "cost_compile": COST_COMPILE,
    "cost_step_found": Obj(function=OSTR, compiled=BOOL),
    "cost_eager_call": COST_CALL,
    "cost_eager_run": Obj(status=OSTR, message=OSTR, calls=INT),
    # the other runs of `tcx cost` (the eager ones, and the repeats within --budget), appended by tcx
    "cost_run": Obj(
        required=("run",), run=INT, stance=OSTR, status=OSTR, message=OSTR, calls=INT, seconds=ONUM
    ),
    "cost_run_call": COST_CALL,
    "cost_run_span": COST_SPAN,
    "cost_run_compile": COST_COMPILE,
    "cost_calls_more": Obj(
        function=OSTR, file=OSTR, line=OINT, count=INT, total_ns=INT, min_ns=INT, max_ns=INT
    ),
    "cost_profile": Obj(
        index=INT,
        function=OSTR,
        mode=OSTR,
        ended=OSTR,
        next_mode=OSTR,
        names=Seq(STR),
        cpu=Seq(Seq(INT)),
        device=Seq(Seq(INT)),
        extra=Seq(Seq(ANY_SCALAR_OR_OBJECT)),
        truncated=INT,
    ),
    "cost_device": Obj(name=OSTR, capability=OSTR, float32_matmul_precision=OSTR),
    "cost_run_end": Obj(calls=INT, cuda=BOOL, steps=OINT),
    "numerics_config": Obj(role=OSTR, features=Map(OSTR, nullable=True)),
    "numerics_probe": Obj(function=OSTR, backend=OSTR, stage=OSTR, seconds=ONUM),
    "numerics_report": NUMERICS_REPORT,
}

HEADER = Obj(target=OSTR, torch_version=OSTR, tcx_version=OSTR)


def drop_bad_header_fields(header: dict[str, Any]) -> list[str]:
    """Remove header fields of the wrong type (the rest of the recording is still read); say which."""
    out = []
    for name, spec in HEADER.fields.items():
        wrong = spec.check(header.get(name))
        if wrong is not None:
            del header[name]
            out.append(f"malformed header field ignored ({describe(wrong, name)})")
    return out


# ------------------------------------------------------------------ structured-trace records

FILE_REF = Scalar("a file index or name", int, str, nullable=True)
TRACE_FRAME = Obj(filename=FILE_REF, line=OINT, name=OSTR, loc=OSTR)
# The compile context of a record (trace_events.CONTEXT_KEYS).
TRACE_CONTEXT = Obj(
    frame_id=OINT,
    frame_compile_id=OINT,
    attempt=OINT,
    compiled_autograd_id=OINT,
    rank=OINT,
    has_payload=OSTR,
    stack=Seq(TRACE_FRAME, nullable=True),
)
# The body under each event key the model and views read.
TRACE_BODIES: dict[str, Spec] = {
    "dynamo_start": Obj(stack=Seq(TRACE_FRAME, nullable=True)),
    "compilation_metrics": Obj(
        compile_id=OSTR,
        co_name=OSTR,
        co_filename=OSTR,
        co_firstlineno=OINT,
        graph_op_count=OINT,
        guard_count=OINT,
        fail_type=OSTR,
        fail_reason=OSTR,
        recompile_reason=OSTR,
        restart_reasons=Seq(STR, nullable=True),
        entire_frame_compile_time_s=ONUM,
    ),
    "artifact": Obj(name=OSTR, encoding=OSTR),
    "guard_added": Obj(user_stack=Seq(TRACE_FRAME, nullable=True)),
    "guard_added_fast": Obj(user_stack=Seq(TRACE_FRAME, nullable=True)),
}


def trace_problem(md: Any) -> str | None:
    """What is wrong with one structured-trace record's metadata, or None."""
    try:
        wrong = _md_wrong(md)
    except RecursionError:
        return "nested too deeply"
    return None if wrong is None else describe(wrong)


def _md_wrong(md: Any) -> Wrong | None:
    if type(md) is not dict:
        return _wrong(md, "an object")
    wrong = TRACE_CONTEXT.check(md)
    if wrong is not None:
        return wrong
    from tcx.core.ingest.trace_events import event_key

    key = event_key(md)
    spec = TRACE_BODIES.get(key) if key is not None else None
    if spec is None or key is None:
        return None
    wrong = spec.check(md[key])
    if wrong is not None:
        wrong[0].append(key)
    return wrong


def event_problem(event: Any) -> str | None:
    """What is wrong with one recording event, or None when the model and views can use it."""
    try:
        wrong = _event_wrong(event)
    except RecursionError:
        return "nested too deeply"
    return None if wrong is None else describe(wrong)


def _event_wrong(event: Any) -> Wrong | None:
    if type(event) is not dict:
        return _wrong(event, "an object")
    kind = event.get("kind")
    if type(kind) is not str:
        return ["kind"], "is missing" if kind is None else _wrong(kind, "a string")[1]
    for name, common in COMMON.items():
        if name in event:
            wrong = common.check(event[name])
            if wrong is not None:
                wrong[0].append(name)
                return wrong
    if "hook_error" in event and kind in HOOK_ERROR_KINDS:  # a failed capture; views skip these
        return None
    spec = RECORDER_EVENTS.get(kind)
    wrong = spec.check(event) if spec is not None else None
    if wrong is None and kind == "trace":  # `md` is an object: the spec checked it
        wrong = _md_wrong(event["md"])
        if wrong is not None:
            wrong[0].append("md")
    return wrong
