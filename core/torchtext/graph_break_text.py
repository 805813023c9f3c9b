"""Parse the `dynamo_graph_break_reason` artifact text into fields.

The text is what `TORCH_LOGS=graph_breaks` prints; it is all an offline log has, and the
live recorder's typed hook event only adds exact fields on top of it. Format (torch 2.6+):

    Graph break in user code at FILE:LINE
    Graph Break Reason: <gb_type>            (or a preamble, then the gb_type on its own line;
                                              "Failed to handle graph break gracefully. ..." and
                                              "Encountered graph break that we cannot resume
                                              from. ..." mean the rest of the function runs eager)
      Explanation: ...
      Hint: ...
      Developer debug context: ...
     For more details about this graph break, please visit: https://.../gb/gb0170.html
    User code traceback:
      File "F", line N, in NAME
        CODE
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field

_AT = re.compile(r"^Graph break in user code at (?P<file>.+):(?P<line>\d+)\s*$", re.M)
_GB_URL = re.compile(r"/gb/(gb\d+)\.html", re.I)
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>.+)$')
_NESTED = "*** While handling this graph break, another graph break occurred: ***"
# Sentences torch puts before a break it cannot resume from; the break itself follows
# "Graph break encountered:". The rest of the function then runs in eager Python.
_SKIP_PREAMBLES = (
    "Failed to handle graph break gracefully.",  # skips the whole function
    "Encountered graph break that we cannot resume from.",  # compiles up to it, skips the rest
)
# Lines torch puts before the break type when the break happened inside a call it traced.
_PREAMBLES = ("Encountered graph break when attempting to trace",)


@dataclass
class BreakSection:
    gb_type: str
    gb_id: str | None = None
    explanation: str = ""
    hints: list[str] = field(default_factory=list)
    debug_context: str = ""


@dataclass
class ParsedBreak:
    file: str | None = None
    line: int | None = None
    sections: list[BreakSection] = field(default_factory=list)  # first: the break; later: ones it caused
    frame_skipped: bool = False
    user_stack: list[dict] = field(default_factory=list)

    @property
    def primary(self) -> BreakSection:
        return self.sections[0] if self.sections else BreakSection(gb_type="unknown graph break")


def parse_graph_break(text: str) -> ParsedBreak:
    out = ParsedBreak()
    m = _AT.search(text)
    if m:
        out.file, out.line = m.group("file"), int(m.group("line"))
    body, _, traceback_part = text.partition("\nUser code traceback:")
    traceback_part = re.split(r"\n(?:Traceback \(most recent call last\):|NoneType: None)", traceback_part)[0]
    out.user_stack = _parse_frames(traceback_part)
    reason = body.split("Graph Break Reason:", 1)[1] if "Graph Break Reason:" in body else body
    reason = reason.split("\nStack variable source attribution:", 1)[0]
    if reason.lstrip().startswith(_SKIP_PREAMBLES):
        out.frame_skipped = True
        reason = reason.split("Graph break encountered:", 1)[-1]
    out.sections = [_parse_section(chunk) for chunk in reason.split(_NESTED) if chunk.strip()]
    if any("Skipping the frame" in s.explanation or "frame skipped" in s.debug_context for s in out.sections):
        out.frame_skipped = True
    return out


def _parse_section(chunk: str) -> BreakSection:
    lines = [ln for ln in chunk.strip("\n").splitlines() if not ln.strip().startswith(_PREAMBLES)]
    start = next((i for i, ln in enumerate(lines) if ln.strip()), len(lines))
    section = BreakSection(gb_type=lines[start].strip() if start < len(lines) else "unknown graph break")
    current: list[str] | None = None
    explanation: list[str] = []
    for raw in lines[start + 1 :]:
        stripped = raw.strip()
        if stripped.startswith("Explanation:"):
            current = explanation
            explanation.append(stripped.removeprefix("Explanation:").strip())
        elif stripped.startswith("Hint:"):
            section.hints.append(stripped.removeprefix("Hint:").strip())
            current = None
        elif stripped.startswith("Developer debug context:"):
            section.debug_context = stripped.removeprefix("Developer debug context:").strip()
            current = None
        elif "For more details about this graph break" in stripped:
            url = _GB_URL.search(stripped)
            section.gb_id = url.group(1).upper() if url else None
            current = None
        elif current is not None:
            current.append(raw.rstrip())
    first, *rest = explanation or [""]
    section.explanation = (first + ("\n" + textwrap.dedent("\n".join(rest)) if rest else "")).strip()
    return section


def _parse_frames(text: str) -> list[dict]:
    frames: list[dict] = []
    lines = text.splitlines()
    for i, line in enumerate(lines):
        m = _FRAME.match(line)
        if not m:
            continue
        code = ""
        if i + 1 < len(lines) and not _FRAME.match(lines[i + 1]) and lines[i + 1].startswith("    "):
            code = lines[i + 1].strip()
        frames.append(
            {
                "file": m.group("file"),
                "line": int(m.group("line")),
                "name": m.group("name"),
                "code": code,
            }
        )
    return frames
