"""The line format both TORCH_TRACE readers share (core/ingest/trace_log.py reads eagerly,
core/ingest/trace_lazy.py leaves payloads on disk): a record's glog prefix, and the per-file tally
that turns a metadata line into a record or a listed problem."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

from tcx.core.ingest.event_schema import MAX_REPORTED, decode_json, trace_problem

PREFIX = re.compile(r"^[VIWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+ +\d+ [^\]]*\] ")


def _json_error(exc: ValueError) -> str:
    return f"{exc.msg} at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else str(exc)


# Problems of these kinds are listed one by one up to the limit per file; the rest are counted.
_LISTED = {"junk": 3, "malformed": MAX_REPORTED}


class Tally:
    """What both readers (this eager one, and core/ingest/trace_lazy.py) share: a non-payload line turned
    into a record or a problem, and the per-file problems (how many of a kind are listed is
    decided when the tally is closed)."""

    def __init__(self, file: Path, rank: int | None) -> None:
        self.file, self.rank = file, rank
        self.entries: list[tuple[int | None, str, str]] = []  # (line, kind, what), in order
        self.counts: Counter[str] = Counter()

    def _add(self, kind: str, lineno: int | None, what: str) -> None:
        self.counts[kind] += 1
        if self.counts[kind] <= _LISTED.get(kind, self.counts[kind]):
            self.entries.append((lineno, kind, what))

    def junk(self, line: str, lineno: int) -> None:
        if line.strip():
            self._add("junk", lineno, "not a trace record")

    def metadata(self, md_text: str, lineno: int) -> dict[str, Any] | None:
        """The metadata of a glog-prefixed line (its JSON after the prefix), or None (reported)."""
        try:
            md = decode_json(md_text)
        except ValueError as exc:
            self._add("json", lineno, f"corrupted JSON ({_json_error(exc)})")
            return None
        if not isinstance(md, dict):
            self._add("json", lineno, "trace record is not a JSON object")
            return None
        why = trace_problem(md)
        if why is not None:
            self._add("malformed", lineno, f"malformed trace record skipped ({why})")
            return None
        if self.rank is not None and "rank" not in md:
            md["rank"] = self.rank
        return md

    def checksum_failed(self, line: int) -> None:
        self._add("checksum", line, "payload does not match its checksum (corrupted?)")

    def unreadable(self, exc: BaseException) -> None:
        self._add("unreadable", None, f"cannot read ({exc})")

    def close(self) -> list[str]:
        listed: Counter[str] = Counter()
        problems = []
        for lineno, kind, what in self.entries:
            listed[kind] += 1
            if listed[kind] <= _LISTED.get(kind, listed[kind]):
                where = self.file.name if lineno is None else f"{self.file.name}:{lineno}"
                problems.append(f"{where}: {what}")
        if self.counts["junk"] > _LISTED["junk"]:
            problems.append(f"{self.file.name}: {self.counts['junk']} lines in all were not trace records")
        if self.counts["malformed"] > MAX_REPORTED:
            problems.append(
                f"{self.file.name}: {self.counts['malformed']} malformed trace records in all were skipped"
            )
        return problems
