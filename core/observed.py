"""What a live run could not observe: a gate never passes a program it did not see.

tcx's counts come from torch's structured trace. When Dynamo's own hooks saw a compile (a
graph break, a traced instruction) whose trace events never arrived, the recording is
incomplete and every count built from it would be too low: that is an error, never
"0 graph breaks". Compiles in the program's child processes are recorded by each child
(core/recorder/children.py) and summarized here into the run's recording; a child tcx could
not record is listed as not observed. Torch-free: also used on saved recordings.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tcx.core.analysis import RunModel, build_model
from tcx.core.budgets import COUNT_KEYS
from tcx.core.errors import InputError
from tcx.core.recording import RecordingWriter, load_recording

# Recorder events written while Dynamo compiles one compile id (core/recorder/compat*.py).
_COMPILE_HOOK_EVENTS = frozenset({"graph_break", "trace_instructions", "bytecode", "guards"})
# A frame's compile id as torch prints it (`0/1`, `!2/0/1` under compiled autograd); its trace
# events carry the same id (core/trace_events.compile_id_of).
_FRAME_COMPILE_ID = re.compile(r"(?:!\d+/)?\d+/\d+")


def lost_compile_ids(model: RunModel) -> list[str]:
    """Compile ids Dynamo's hooks saw but the structured trace never mentioned."""
    if model.recording is None or len(model.ranks) > 1:
        return []
    traced = {ev.compile_id for ev in model.trace_events}
    lost: dict[str, None] = {}
    for event in model.recording.events:
        cid = event.get("compile_id")
        if event.get("kind") not in _COMPILE_HOOK_EVENTS or not isinstance(cid, str):
            continue
        if _FRAME_COMPILE_ID.fullmatch(cid) and cid not in traced:
            lost[cid] = None
    return list(lost)


def check_capture(model: RunModel, saved_to: str | None = None) -> None:
    """Raise InputError (exit 4) when the recording lost trace events of compiles that happened."""
    lost = lost_compile_ids(model)
    if not lost:
        return
    shown = ", ".join(lost[:8]) + (f" and {len(lost) - 8} more" if len(lost) > 8 else "")
    features = (model.run_start or {}).get("features") or {}
    why = features.get("structured_trace") or (
        "the program probably replaced or silenced torch's structured-trace logging "
        "(`torch.__trace`) in a way tcx could not undo"
    )
    kept = f" The recording was saved to {saved_to}." if saved_to else ""
    raise InputError(
        f"capture was lost: Dynamo compiled {len(lost)} frame(s) (compile ids {shown}) whose "
        f"structured-trace events never reached tcx, so its counts would be too low and no "
        f"report or check result is given. Cause: {why}.{kept}"
    )


# --- child processes ---------------------------------------------------------------------------
# Each child process the program started writes its own recording (core/recorder/children.py);
# the parent summarizes them into `child_process` events of the run's recording, so a saved
# recording reports them as the live run did.

MAX_CHILD_SITES = 200


def _site_key(site: dict[str, Any]) -> list[Any]:
    """A distinct break site, as explain keys it: (type, file, line)."""
    return [site.get("type"), site.get("file"), site.get("line")]


def attach_children(recording: Path, directory: Path) -> None:
    """Append one `child_process` event per child that compiled (or could not be observed)."""
    if not directory.is_dir():
        return
    summaries = [s for s in map(_summarize_child, sorted(directory.glob("*.tcx"), key=_pid_order)) if s]
    for path in sorted(directory.glob("*.unobserved.json"), key=_pid_order):
        summaries.append(_unobserved(path))
    if not summaries:
        return
    writer = RecordingWriter(recording)
    for summary in summaries:
        writer.write("child_process", **summary)
    writer.close()


def _pid_order(path: Path) -> tuple[int, str]:
    head = path.name.split(".", 1)[0]
    return (int(head) if head.isdigit() else 0, path.name)


def _summarize_child(path: Path) -> dict[str, Any] | None:
    from tcx.core.explain import explain, to_json
    from tcx.core.selection import compiled_functions, select

    try:
        rec = load_recording(path)
    except InputError:
        return None
    model = build_model(rec, "recording")
    child = rec.header.get("child") if isinstance(rec.header.get("child"), dict) else {}
    lost = lost_compile_ids(model)
    if lost:
        return {**_identity(child), "observed": False, "reason": f"capture lost (compile ids {lost})"}
    if not model.compiles:
        return None  # it imported torch (a data-loader worker, say) but compiled nothing
    doc = to_json(explain(model))
    functions = {}
    for name in compiled_functions(model):  # so `script.py:func` counts a child's compiles of func
        counts = to_json(explain(model, select(model, name, strict=False)))
        functions[name] = {key: counts[key] for key in CHILD_COUNTS}
        functions[name]["sites"] = [_site_key(site) for site in counts["graph_breaks"][:MAX_CHILD_SITES]]
    return {
        **_identity(child),
        "observed": True,
        **{key: doc[key] for key in CHILD_COUNTS},
        "functions": functions,
        "graph_breaks": [
            {k: site[k] for k in ("type", "gb_id", "file", "line", "function", "occurrences")}
            for site in doc["graph_breaks"][:MAX_CHILD_SITES]
        ],
        "problems": list(rec.problems[:5]),
    }


def _unobserved(path: Path) -> dict[str, Any]:
    try:
        info = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        info = {}
    info = info if isinstance(info, dict) else {}
    return {**_identity(info), "observed": False, "reason": str(info.get("reason") or "unknown")}


def _identity(info: dict[str, Any]) -> dict[str, Any]:
    argv = info.get("argv")
    return {
        "pid": info.get("pid") if isinstance(info.get("pid"), int) else None,
        "how": str(info.get("how") or "unknown"),
        "argv": [str(a) for a in argv] if isinstance(argv, list) else [],
    }


CHILD_COUNTS = COUNT_KEYS  # a child process counts what the parent counts


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
            if function is None:
                sites = [_site_key(s) for s in child.get("graph_breaks") or [] if isinstance(s, dict)]
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


def child_processes(model: RunModel) -> ChildProcesses:
    out = ChildProcesses()
    if model.recording is None:
        return out
    for event in model.recording.of_kind("child_process"):
        if event.get("observed") is True and all(_is_count(event.get(c)) for c in CHILD_COUNTS):
            sites = event.get("graph_breaks")
            sites = [s for s in sites if isinstance(s, dict)] if isinstance(sites, list) else []
            out.observed.append({**{k: v for k, v in event.items() if k != "kind"}, "graph_breaks": sites})
        else:  # a child tcx could not record, or an event it cannot read: never counted as clean
            out.not_observed.append({k: v for k, v in event.items() if k != "kind"})
    return out


def _counts_of(child: dict[str, Any], function: str) -> dict[str, int]:
    functions = child.get("functions")
    counts = functions.get(function) if isinstance(functions, dict) else None
    if not isinstance(counts, dict):
        return {}
    return {k: v for k, v in counts.items() if k in CHILD_COUNTS and _is_count(v)}


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
