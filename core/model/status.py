"""How a run went, computed once per model (`RunModel.status`): how the program ended, the
conditions it compiled under (core/model/conditions.py), the device, its child processes, and
compiles whose trace events never arrived.

Every envelope and every verdict reads this one object: a report asks it a dozen times and it
is worked out once. Pure and torch-free.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from tcx.core.budgets import COUNT_KEYS
from tcx.core.model.conditions import CompileCall, RunConditions, compile_calls, run_conditions

if TYPE_CHECKING:
    from tcx.core.model.run import RunModel
    from tcx.core.selection import Selection

_DEVICE_TYPE = re.compile(r"type='(?P<type>[\w]+)'")
# Recorder events written while Dynamo compiles one compile id (core/recorder/compat*.py).
_COMPILE_HOOK_EVENTS = ("compile_seen", "graph_break", "trace_instructions", "bytecode", "guards")
# The trace records of a compile itself, written however it ends: records that merely carry its
# id (describe_tensor, from modules that kept their own reference to trace_structured) do not
# show the compile was traced.
_COMPILE_RECORDS = frozenset({"dynamo_start", "compilation_metrics"})
# A frame's compile id as torch prints it (`0/1`, `!2/0/1` under compiled autograd).
_FRAME_COMPILE_ID = re.compile(r"(?:!\d+/)?\d+/\d+")
CHILD_COUNTS = COUNT_KEYS  # a child process counts what the parent counts


@dataclass(frozen=True)
class ProgramStatus:
    """How the target ended: ok, exception, syntax, exit, crashed, died, timeout, interrupted,
    usage (what the recorder child and the parent saw); "not recorded" for a log."""

    status: str
    exit_code: Any
    exc_type: str | None
    message: str | None
    traceback: str | None
    signal: str | None
    interrupted_by: str | None
    timeout_s: Any
    output_tail: list[str] | None
    frames: list[dict[str, Any]] | None
    # what the recorder's own `program_exit` said, before an interrupt or a timeout overrides it:
    # "usage" and "setup" (the program could not start as asked), "tcx_error" (the recorder failed)
    exit_status: str | None = None
    where: str | None = None  # tcx's own line that failed, for "tcx_error"
    wall_s: Any = None  # how long the program ran, as tcx's parent measured it

    @property
    def failed(self) -> bool:
        """The target did not end well; a log says nothing about how its program ended."""
        return self.status not in ("ok", "not recorded")


@dataclass
class ChildProcesses:
    """The program's child processes that compiled, as the run's recording lists them."""

    observed: list[dict[str, Any]] = field(default_factory=list)
    not_observed: list[dict[str, Any]] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.observed or self.not_observed)

    def total(self, count: str, function: str | None = None) -> int:
        """`count` over the observed children; with `function`, over their compiles of it."""
        if function is None:
            return sum(c[count] for c in self.observed)
        return sum(_counts_of(c, function).get(count, 0) for c in self.observed)

    def compiled(self, function: str) -> bool:
        return any(_counts_of(c, function) for c in self.observed)

    def new_sites(self, known: set[tuple[Any, ...]], function: str | None = None) -> int:
        """Distinct break sites of the children that are not among `known` (the parent's)."""
        seen = set(known)
        for child in self.observed:
            sites: Any
            if function is None:
                sites = [site_key(s) for s in child.get("graph_breaks") or [] if isinstance(s, dict)]
            else:
                functions = child.get("functions")
                entry = functions.get(function) if isinstance(functions, dict) else None
                sites = entry.get("sites") if isinstance(entry, dict) else None
            seen.update(tuple(map(str, k)) for k in sites or [] if isinstance(k, list))
        return len(seen) - len(known)

    def to_json(self) -> dict[str, Any]:
        return {
            "observed_count": len(self.observed),
            "not_observed_count": len(self.not_observed),
            **{count: self.total(count) for count in CHILD_COUNTS},
            "processes": self.observed + self.not_observed,
        }


@dataclass(frozen=True)
class Features:
    """The recorder's capture layers in this run (its `run_start` event): each name, `device=cuda`
    style names included, with why it is unavailable (None: it was installed). A log has none."""

    reasons: Mapping[str, str | None] = field(default_factory=dict)

    def recorded(self, name: str) -> bool:
        """The recorder tried to install `name` (installed or not): an absent one is an older run's."""
        return any(key.split("=", 1)[0] == name for key in self.reasons)

    def why(self, name: str) -> str | None:
        """Why `name` (or a `name=...` variant) is unavailable in this run; None when it is not."""
        return next(
            (str(why) for key, why in self.reasons.items() if key.split("=", 1)[0] == name and why), None
        )

    def value(self, name: str) -> str | None:
        """The value a `name=VALUE` feature was asked with (`device=cuda` -> "cuda")."""
        return next((key.split("=", 1)[1] for key in self.reasons if key.startswith(name + "=")), None)

    def unavailable(self) -> dict[str, str]:
        """Every layer that could not be installed, with why: the notes a report prints."""
        return {key: str(why) for key, why in self.reasons.items() if why}


@dataclass(frozen=True)
class RunStatus:
    program: ProgramStatus
    conditions: RunConditions
    children: ChildProcesses
    asked_device: str | None  # `--device`, when the run was asked for one
    devices: dict[str, tuple[str, ...]]  # compile id -> device types of its tensors (describe_tensor)
    lost_compiles: tuple[str, ...]  # compiled (Dynamo's hooks saw it) but no trace event arrived
    features: Features = field(default_factory=Features)
    # the first line of each distinct WARNING/ERROR/CRITICAL record torch logged (graph breaks left
    # out: explain shows them), in run order
    warnings: tuple[str, ...] = ()
    torch_compile_calls: tuple[CompileCall, ...] = ()
    # the functions tcx called itself (`--call`, `tcx_calls()`): everything recorded belongs to them
    called: frozenset[str] = frozenset()

    def device(self, selection: Selection | None = None) -> str | None:
        """The device the selected compiles' tensors were on; `--device` when it was asked."""
        if self.asked_device:
            return self.asked_device
        types: list[str] = []
        for cid, found in self.devices.items():
            if selection is None or selection.includes(cid):
                types += [t for t in found if t not in types]
        return ",".join(types) or None

    def program_json(self) -> dict[str, Any]:
        p = self.program
        return {
            "status": p.status,
            "exit_code": p.exit_code,
            "exc_type": p.exc_type,
            "message": p.message,
            "traceback": p.traceback,
            "signal": p.signal,
            "interrupted_by": p.interrupted_by,
            "timeout_s": p.timeout_s,
            "output_tail": p.output_tail,
            "child_processes": self.children.to_json(),
        }


def run_status(m: RunModel) -> RunStatus:
    started = m._run_start or {}
    reasons = started.get("features")
    features = Features(dict(reasons) if isinstance(reasons, dict) else {})
    asked = features.value("device")
    devices: dict[str, list[str]] = {}
    if not asked:
        for ev in m._documents.of("describe_tensor"):
            match = _DEVICE_TYPE.search(str(ev.body_field("device") or ""))
            found = devices.setdefault(ev.compile_id or "", [])
            if match and match.group("type") not in found:
                found.append(match.group("type"))
    return RunStatus(
        program=_program(m),
        conditions=run_conditions(m),
        children=_children(m),
        asked_device=asked,
        devices={cid: tuple(types) for cid, types in devices.items()},
        lost_compiles=tuple(_lost_compiles(m)),
        features=features,
        warnings=tuple(_warnings(m)),
        torch_compile_calls=compile_calls(m),
        called=frozenset(str(c["function"]) for c in m._calls if isinstance(c.get("function"), str)),
    )


def _warnings(m: RunModel) -> list[str]:
    found: dict[str, None] = {}
    for log in m._logs:
        message = str(log.get("message") or "").strip()
        if (
            log.get("level") in ("WARNING", "ERROR", "CRITICAL")
            and message
            and not message.startswith("Graph break")
        ):
            found[message.splitlines()[0]] = None
    return list(found)


def _program(m: RunModel) -> ProgramStatus:
    pe = m._program_exit or {}
    oc = m._outcome or {}
    status = pe.get("status")
    if oc.get("interrupted"):  # tcx got SIGINT/SIGTERM and stopped the program
        status = "interrupted"
    elif oc.get("timed_out"):
        status = "timeout"
    elif status is None and oc:
        status = "crashed" if oc.get("signal") else "died"
    elif status is None:
        status = "unknown" if m.source_kind != "trace" else "not recorded"
    exit_code = pe.get("exit_code", oc.get("returncode"))
    if status in ("exception", "syntax") and "exit_code" not in pe:
        exit_code = 1  # older recordings left it out; Python exits 1 on an uncaught exception
    frames = pe.get("frames")
    return ProgramStatus(
        status=str(status),
        exit_code=exit_code,
        exc_type=pe.get("exc_type"),
        message=pe.get("message"),
        traceback=pe.get("traceback"),
        signal=oc.get("signal"),
        interrupted_by=oc.get("interrupted_by"),
        timeout_s=oc.get("timeout_s"),
        output_tail=oc.get("output_tail"),
        frames=frames if isinstance(frames, list) else None,
        exit_status=pe.get("status"),
        where=pe.get("where"),
        wall_s=oc.get("wall_s"),
    )


def _children(m: RunModel) -> ChildProcesses:
    out = ChildProcesses()
    for event in m._captures.of("child_process"):
        if event.get("observed") is True and all(_is_count(event.get(c)) for c in CHILD_COUNTS):
            sites = event.get("graph_breaks")
            sites = [s for s in sites if isinstance(s, dict)] if isinstance(sites, list) else []
            out.observed.append({**{k: v for k, v in event.items() if k != "kind"}, "graph_breaks": sites})
        else:  # a child tcx could not record, or an event it cannot read: never counted as clean
            out.not_observed.append({k: v for k, v in event.items() if k != "kind"})
    return out


def _lost_compiles(m: RunModel) -> list[str]:
    """Compile ids tcx's own hooks saw whose compile the structured trace holds no record of."""
    if m.source_kind == "trace" or len(m.ranks) > 1:
        return []
    traced = {ev.compile_id for name in _COMPILE_RECORDS for ev in m._documents.of(name)}
    lost: dict[str, None] = {}
    for kind in _COMPILE_HOOK_EVENTS:
        for event in m._captures.of(kind):
            cid = event.get("compile_id")
            if isinstance(cid, str) and _FRAME_COMPILE_ID.fullmatch(cid) and cid not in traced:
                lost[cid] = None
    return list(lost)


def site_key(site: dict[str, Any]) -> list[Any]:
    """A distinct break site, as explain keys it: (type, file, line)."""
    return [site.get("type"), site.get("file"), site.get("line")]


def _counts_of(child: dict[str, Any], function: str) -> dict[str, int]:
    functions = child.get("functions")
    counts = functions.get(function) if isinstance(functions, dict) else None
    if not isinstance(counts, dict):
        return {}
    return {k: v for k, v in counts.items() if k in CHILD_COUNTS and _is_count(v)}


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
