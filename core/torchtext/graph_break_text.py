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

A backend that fails on a graph with one of the exceptions torch allows to fall back
("Backend compiler exception", GB0219) makes two records of one compile: first torch's warning

    WON'T CONVERT <function> <file> line <first line of the function>
    ========== TorchDynamo Stack Trace ==========
    Traceback ... <ExceptionType>: <message>

then the break itself, whose header names the same frame by its first line and whose debug context
names the line of that frame torch was compiling (`Traceback:` and a `File` line).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field

_WONT_CONVERT = re.compile(r"^WON'T CONVERT (?P<name>\S+) (?P<file>.+) line (?P<line>\d+) ?$", re.M)
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
    not_converted: str | None = None  # the function of a "WON'T CONVERT" record, at file:line
    compiled_frame: dict | None = None  # a backend failure: the frame and line torch was compiling

    @property
    def primary(self) -> BreakSection:
        return self.sections[0] if self.sections else BreakSection(gb_type="unknown graph break")


def parse_graph_break(text: str) -> ParsedBreak:
    wont = _WONT_CONVERT.match(text)
    if wont:
        return _parse_not_converted(text, wont)
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
    if out.primary.debug_context.startswith("Backend:"):
        context = reason.split("Developer debug context:", 1)[-1].split("For more details", 1)[0]
        frames = _parse_frames(context)
        out.compiled_frame = frames[-1] if frames else None
    return out


def _parse_not_converted(text: str, header: re.Match[str]) -> ParsedBreak:
    """A "WON'T CONVERT" record: the frame torch names (its function's first line), and the
    exception's last line as the explanation. torch writes these from its fall back on a backend
    failure, the break's own record follows."""
    trace = text.split("\n==========", 2)[1] if "\n==========" in text else text[header.end() :]
    raised = next((ln.strip() for ln in reversed(trace.splitlines()) if ln.strip()), "")
    backend = "call_user_compiler" in text
    gb_type = "Backend compiler exception" if backend else "WON'T CONVERT"
    section = BreakSection(gb_type=gb_type, explanation=raised)
    return ParsedBreak(
        file=header.group("file"),
        line=int(header.group("line")),
        sections=[section],
        not_converted=header.group("name"),
    )


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
