"""Bytecode pairs per compiled frame: the code Dynamo was given and the code it put in its place.

A live run records one `bytecode` capture per compiled frame (dis rows of both, the transformed code
decompiled by depyf or as annotated dis, the globals the transformed code calls). A TORCH_TRACE log
carries torch's `<name>_ORIGINAL_BYTECODE` / `<name>_MODIFIED_BYTECODE` artifacts (dis text only),
parsed here; the calls are the generated globals the transformed code loads. The bytecode view
chains them (which graph, which resume function each call reaches).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from tcx.core.ingest.trace_events import TraceEvent
from tcx.core.model.facts import Compile
from tcx.core.torchtext.names import is_generated_global

# No two whitespace repeats side by side: `\s*(\d+)?\s+` split a line of 4,000 blanks every way
# before failing (seconds per line); this form is linear in the line.
_DIS_ROW = re.compile(
    r"^(?:\s*(?P<line>\d+))?\s+(?:(?P<target>>>)\s*)?(?P<offset>\d+) (?P<opname>[A-Z_0-9]+)\s*(?P<rest>.*)$"
)
BYTECODE_ARTIFACTS = "artifact:*_BYTECODE"


@dataclass(frozen=True)
class BytecodePair:
    """One compiled frame's original and transformed bytecode (dis rows: offset, opname, argrepr,
    line, target)."""

    compile_id: str | None
    function: str
    file: str | None
    firstlineno: int | None
    original: list[dict[str, Any]]
    transformed: list[dict[str, Any]]
    transformed_source: str | None
    decompiled_with: str | None
    original_source: str | None
    called: list[str]  # the globals the transformed code calls (graphs, resume functions)


def read_bytecode_pairs(
    live: list[BytecodePair], artifacts: Iterable[TraceEvent], compiles: Mapping[str, Compile]
) -> list[BytecodePair]:
    """A live run's pairs (`live_pairs`), or else the log's artifacts' (parsed only then)."""
    return live or _from_trace(artifacts, compiles)


def live_pairs(captures: Iterable[dict[str, Any]]) -> list[BytecodePair]:
    """A live run's pairs alone, as the recorder wrote them (no log artifact is parsed)."""
    return [_live(e) for e in captures if not e.get("error")]


def _live(e: dict[str, Any]) -> BytecodePair:
    return BytecodePair(
        compile_id=e.get("compile_id"),
        function=str(e.get("function") or "?"),
        file=e.get("file"),
        firstlineno=e.get("firstlineno"),
        original=list(e.get("original") or []),
        transformed=list(e.get("transformed") or []),
        transformed_source=e.get("transformed_source"),
        decompiled_with=e.get("transformed_how"),
        original_source=e.get("original_source"),
        called=[str(n) for n in e.get("calls") or []],
    )


def _from_trace(artifacts: Iterable[TraceEvent], compiles: Mapping[str, Compile]) -> list[BytecodePair]:
    rows: dict[tuple[str | None, str], dict[str, list[dict[str, Any]]]] = {}
    for ev in artifacts:
        name = ev.name.removeprefix("artifact:")
        for suffix, attr in (("_ORIGINAL_BYTECODE", "original"), ("_MODIFIED_BYTECODE", "transformed")):
            if name.endswith(suffix):
                pair = rows.setdefault(
                    (ev.compile_id, name[: -len(suffix)]), {"original": [], "transformed": []}
                )
                pair[attr] = parse_dis(ev.payload or "")
    out = []
    for (cid, fn), pair in rows.items():
        comp = compiles.get(cid or "")
        names = [
            r["argrepr"].removeprefix("NULL + ") for r in pair["transformed"] if r["opname"] == "LOAD_GLOBAL"
        ]
        out.append(
            BytecodePair(
                compile_id=cid,
                function=fn,
                file=comp.co_filename if comp else None,
                firstlineno=comp.co_firstlineno if comp else None,
                original=pair["original"],
                transformed=pair["transformed"],
                transformed_source=None,
                decompiled_with=None,
                original_source=None,
                called=[n for n in dict.fromkeys(names) if is_generated_global(n)],
            )
        )
    return out


def parse_dis(text: str) -> list[dict[str, Any]]:
    rows = []
    for raw in text.splitlines():
        m = _DIS_ROW.match(raw)
        if m:
            rows.append(
                {
                    "offset": int(m.group("offset")),
                    "opname": m.group("opname"),
                    "argrepr": _argrepr(m.group("rest")),
                    "line": int(m.group("line")) if m.group("line") else None,
                    "target": bool(m.group("target")),
                }
            )
    return rows


def _argrepr(rest: str) -> str:
    rest = rest.strip()
    m = re.match(r"^\d+\s*(?:\((?P<repr>.*)\))?$", rest)
    if m:
        return m.group("repr") or rest.split()[0] if rest else ""
    return rest
