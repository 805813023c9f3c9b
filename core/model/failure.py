"""What failed when a run did not end well, and where, in one paragraph's worth of facts.

A failed run must never read as a clean one: the views end with this instead of a verdict such
as "no graph breaks". The message is torch's (or the program's) once, without the paragraph
torch appends about TORCHDYNAMO_VERBOSE; the place is the user's frames of the traceback (the
line that called into what failed, and the user's frame where it was raised), never torch's.
Pure and torch-free.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tcx.core.model.facts import Frame
from tcx.core.model.run import RunModel
from tcx.core.model.status import ProgramStatus

# torch appends these to its exceptions; they say how to get more output, not what failed.
_BOILERPLATE = re.compile(
    r"\n*(Set TORCHDYNAMO_VERBOSE=1|For even more developer context|You can suppress this exception)"
)
_TB_LINE = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>.+)$')
MAX_MESSAGE_LINES = 12


@dataclass(frozen=True)
class Failure:
    status: str  # program_status's: exception, syntax, exit, crashed, died, timeout, interrupted
    headline: str  # e.g. "it raised BackendCompilerFailed"
    message: str  # the exception's message, once
    message_lines_cut: int  # lines of a long message left out of `message`
    raised_at: Frame | None  # the innermost user frame of the traceback
    called_from: Frame | None  # the user's line that called into torch or a library, when different
    other_frames: int  # frames of the traceback not shown (torch, libraries, the standard library)
    during_compile: bool  # raised inside torch.compile (Dynamo, AOTAutograd or Inductor)
    compiles: int  # compiles recorded before it stopped
    output_tail: list[str]  # the program's last lines of output, when there is no traceback


def failure(m: RunModel) -> Failure | None:
    """None when the program ended well (or the input does not say how it ended: a log)."""
    st = m.status.program
    status = st.status
    if status in ("ok", "not recorded"):
        return None
    frames = _frames(m._program_exit or {}, st.traceback or "")
    user = [f for f in frames if f.origin == "user"]
    raised_at = user[-1] if user else None
    called_from = _called_from(frames)
    if called_from == raised_at:
        called_from = None
    message, cut = _message(st.message or "")
    shown = sum(f is not None for f in (raised_at, called_from))
    return Failure(
        status=status,
        headline=_headline(m, st),
        message=message,
        message_lines_cut=cut,
        raised_at=raised_at,
        called_from=called_from,
        other_frames=max(0, len(frames) - shown),
        during_compile=any(
            f.origin == "torch" and re.search(r"/torch/_(dynamo|inductor|functorch)/", f.file) for f in frames
        ),
        compiles=len(m.compiles),
        output_tail=[] if frames else list(st.output_tail or [])[-10:],
    )


def _headline(m: RunModel, st: ProgramStatus) -> str:
    status = st.status
    if status == "exception":
        return f"it raised {st.exc_type or 'an exception'}"
    if status == "syntax":
        return "it has a syntax error"
    if status == "exit":
        return f"it called sys.exit({st.exit_code})"
    if status == "timeout":
        return f"tcx stopped it after --timeout {st.timeout_s} s"
    if status == "interrupted":
        return f"tcx received {st.interrupted_by or 'a signal'} and stopped it"
    if status == "crashed":
        return f"the process was killed by {st.signal} (a crash in native code?)"
    if status == "usage":
        return "tcx could not run it as asked"
    if m._run_start is None:
        return (
            f"tcx's recorder did not start (its process exited with code {st.exit_code} "
            "before the program ran)"
        )
    return f"the recorder ended without a report (exit code {st.exit_code})"


def _frames(exit_event: dict[str, Any], traceback: str) -> list[Frame]:
    recorded = exit_event.get("frames")
    if isinstance(recorded, list):
        return [
            Frame(str(f["file"]), f.get("line"), str(f.get("name", "?")), f.get("code") or "")
            for f in recorded
            if isinstance(f, dict) and isinstance(f.get("file"), str)
        ]
    if exit_event.get("status") == "syntax" and isinstance(exit_event.get("file"), str):
        return [Frame(exit_event["file"], exit_event.get("line"), "<module>")]
    out = []  # a recording made before tcx kept the frames: read them from the traceback's text
    for line in traceback.splitlines():
        m = _TB_LINE.match(line)
        if m:
            out.append(Frame(m["file"], int(m["line"]), m["name"]))
    return out


def _called_from(frames: list[Frame]) -> Frame | None:
    """The user's line that called into torch or a library (the last user frame before the first
    that is not the user's); in a traceback of user frames only, the raising function's caller."""
    last = None
    for f in frames:
        if f.origin != "user":
            return last
        last = f
    return frames[-2] if len(frames) > 1 else None


def _message(text: str) -> tuple[str, int]:
    m = _BOILERPLATE.search(text)
    text = (text[: m.start()] if m else text).strip()
    lines = text.splitlines()
    if len(lines) <= MAX_MESSAGE_LINES:
        return text, 0
    return "\n".join(lines[:MAX_MESSAGE_LINES]), len(lines) - MAX_MESSAGE_LINES
