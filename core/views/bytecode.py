"""The bytecode view's facts: per compiled frame, original vs transformed bytecode and how they chain.

Pure and torch-free. A live run records one `bytecode` event per compiled frame (dis rows,
the transformed code decompiled by depyf or as annotated dis). A TORCH_TRACE log carries
torch's `<name>_ORIGINAL_BYTECODE` / `<name>_MODIFIED_BYTECODE` artifacts (dis text only).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tcx.core.model import RunModel
from tcx.core.model.bytecode_pairs import BytecodePair
from tcx.core.selection import Selection, whole_run
from tcx.core.torchtext.names import (
    is_compiled_graph_global,
    parse_resume,
    resume_global_offset,
)
from tcx.core.views.envelope import envelope

SCHEMA = "tcx.bytecode/1"


@dataclass
class Frame:
    """A compiled frame's bytecode pair (the model's, core/model/bytecode_pairs.py) and what its
    transformed code calls, resolved by this view: compiled graphs, resume functions, their compiles."""

    pair: BytecodePair
    calls: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class BytecodeView:
    model: RunModel
    selection: Selection
    frames: list[Frame]
    unavailable: str | None


def build_bytecode(model: RunModel, selection: Selection | None = None) -> BytecodeView:
    selection = selection or whole_run(model)
    pairs = model.bytecode
    frames = [Frame(pair, _calls(pair, pairs)) for pair in pairs]
    reason = None
    if not frames:
        reason = model.status.features.why("bytecode") or "no frame was compiled in this run"
    frames = [f for f in frames if selection.includes(f.pair.compile_id)]
    return BytecodeView(model=model, selection=selection, frames=frames, unavailable=reason)


def _line_at(rows: list[dict[str, Any]], offset: int) -> int | None:
    line = None
    for r in rows:
        if r["offset"] > offset:
            break
        if r.get("line") is not None:
            line = r["line"]
    return line


def _resumes(name: str, function: str) -> bool:
    resumed = parse_resume(name)
    return bool(resumed and resumed[0] == function)


def _resumes_at(frame: BytecodePair) -> int | None:
    """The user line a resume function continues at: where its prologue jumps into the original code."""
    for r in frame.original:
        if r["opname"].startswith("JUMP"):
            m = re.search(r"to (\d+)", r.get("argrepr") or "")
            return _line_at(frame.original, int(m.group(1))) if m else None
    return None


def _calls(frame: BytecodePair, pairs: list[BytecodePair]) -> list[dict[str, Any]]:
    """What the transformed code calls, in order: compiled graphs, resume functions and their compiles."""
    out: list[dict[str, Any]] = []
    for name in frame.called:
        if is_compiled_graph_global(name):
            out.append({"name": name, "kind": "graph", "compile_ids": [frame.compile_id]})
            continue
        offset = resume_global_offset(name)
        line = _line_at(frame.original, offset) if offset is not None else None
        resumed = parse_resume(frame.function)
        target = resumed[0] if resumed else frame.function
        matches = [f for f in pairs if _resumes(f.function, target) and _resumes_at(f) == line]
        out.append(
            {
                "name": name,
                "kind": "resume",
                "resumes_at_line": line,
                "resume_function": matches[0].function if matches else None,
                "compile_ids": [f.compile_id for f in matches],
            }
        )
    return out


def to_json(view: BytecodeView) -> dict[str, Any]:
    return {
        **envelope(SCHEMA, view.model, view.selection),
        "unavailable_reason": view.unavailable,
        "frames": [
            {
                "compile_id": f.pair.compile_id,
                "function": f.pair.function,
                "file": f.pair.file,
                "firstlineno": f.pair.firstlineno,
                "original": f.pair.original,
                "transformed": f.pair.transformed,
                "transformed_source": f.pair.transformed_source,
                "decompiled_with": f.pair.decompiled_with,
                "original_source": f.pair.original_source,
                "calls": f.calls,
            }
            for f in view.frames
        ],
    }
