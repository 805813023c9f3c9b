"""Read TORCH_TRACE logs (a file, or a directory of per-rank files) into a Recording.

Each record is a glog-prefixed line whose JSON is the structured-trace metadata, followed
by the payload as tab-indented lines. The events become `trace` events, exactly like the
live recorder writes, so every view works the same on logs. `has_payload` (the payload's md5)
is checked while reading and then dropped from the metadata: it is the log's checksum, not a
fact about the compile, and without it the metadata torch repeats (thousands of
`chromium_event`s with the same context) is one object (core/ingest/trace_lazy.py). Nothing is executed; bad
lines, and records with a field of the wrong type (core/ingest/event_schema.py), are reported with
file and line and skipped, and the rest is still read.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tcx.core.errors import READ_ERRORS, InputError
from tcx.core.ingest.draft_logs import draft_logs_note
from tcx.core.ingest.recording import Recording
from tcx.core.ingest.trace_events import TraceEvent, event_name, pack, unpack
from tcx.core.ingest.trace_lines import PREFIX, Tally

if TYPE_CHECKING:
    from tcx.core.ingest.trace_lazy import LogRecord

_RANK = re.compile(r"rank_(\d+)")


def load_trace(path: str | Path, *, lazy: bool = True) -> Recording:
    """`lazy` (the default) leaves payloads on disk (core/ingest/trace_lazy.py): a 1 GB log costs its
    metadata in memory, not its graphs and code; `lazy=False` reads every payload now."""
    from tcx.core.ingest.trace_lazy import SHARE_ABOVE, scan_file

    path = Path(path)
    files = _log_files(path)
    events: list[dict[str, Any] | LogRecord] = []
    problems: list[str] = []
    torch_version = None
    big = sum(_size(f) for f in files) > SHARE_ABOVE
    strings: dict[str, str] | None = {} if big else None  # one copy of each metadata string
    starts: list[int] = []  # where each file's events begin (draft_export writes a log of its own)
    for file in files:
        starts.append(len(events))
        rank_match = _RANK.search(file.name)
        rank = int(rank_match.group(1)) if rank_match and len(files) > 1 else None
        file_events: list[LogRecord] | list[dict[str, Any]]
        if lazy:
            file_events, file_problems = scan_file(file, rank, strings)
        else:
            file_events, file_problems = _read_file(file, rank)
        events += file_events
        problems += file_problems
    if not events:
        what = "directory" if path.is_dir() else "file"
        detail = f" ({problems[0]})" if problems else ""
        raise InputError(
            f"{str(path)!r} is not a tcx recording or a TORCH_TRACE log: "
            f"no trace events in the {what}{detail}.",
            hint="TORCH_TRACE logs are written by running a program with TORCH_TRACE=DIR set.",
        )
    metrics_version = None  # every compilation_metrics carries it too, where the artifact is missing
    for ev in events:
        name = ev.name if isinstance(ev, TraceEvent) else event_name(ev["md"])
        if name == "artifact:torch_version" and ev.get("payload"):
            torch_version = _torch_version(unpack(ev["payload"]) or "")
        elif name == "compilation_metrics" and metrics_version is None:
            body = ev.body if isinstance(ev, TraceEvent) else ev["md"].get(name)
            found = body.get("pytorch_version") if isinstance(body, dict) else None
            metrics_version = found if isinstance(found, str) else None
    torch_version = torch_version or metrics_version
    header = {
        "format": "torch-trace",
        "target": str(path),
        "files": [str(f) for f in files],
        "file_starts": starts,
        "torch_version": torch_version,
    }
    return Recording(header=header, events=events, problems=problems, source=str(path))


def _torch_version(payload: str) -> str:
    """torch 2.13+ writes {"pytorch_version": ..., "commit": ...}; older builds wrote the bare version."""
    try:
        value = json.loads(payload)
    except (ValueError, RecursionError):
        return payload.strip()
    if isinstance(value, dict):
        return str(value.get("pytorch_version") or payload.strip())
    return str(value).strip()


def _payload_intact(payload: str, md5: object) -> bool:
    """Check a payload against the md5 torch put in `has_payload` (the last newline is the record's)."""
    if not (isinstance(md5, str) and len(md5) == 32):
        return True
    text = payload[:-1] if payload.endswith("\n") else payload
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest() == md5


def _size(file: Path) -> int:
    try:
        return file.stat().st_size
    except OSError:  # gone since it was listed: its reader reports it
        return 0


def _log_files(path: Path) -> list[Path]:
    try:
        return _listed(path)
    except OSError as exc:  # a name too long, a folder that cannot be listed
        raise InputError(f"cannot read {str(path)[:200]!r}: {exc.strerror or exc}.") from None


def _listed(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(_regular_files(path))
        if not files and not any(path.iterdir()):
            raise InputError(
                f"{str(path)!r} is an empty directory: no TORCH_TRACE logs in it.",
                hint="torch writes a TORCH_TRACE log from its first event on. " + draft_logs_note(),
            )
        if not files:
            raise InputError(f"{str(path)!r} holds no TORCH_TRACE logs (no non-empty regular file in it).")
        return files if any(_RANK.search(f.name) for f in files) else sorted(files, key=_first_record_time)
    if not path.exists():
        raise InputError(f"no such file: {str(path)!r}.")
    return [path]


def _first_record_time(file: Path) -> tuple[str, str]:
    """When a log's first record was written (its glog prefix `MMDD HH:MM:SS.us`), then its name.

    One process can write several logs to a directory: torch.export.draft_export moves torch's
    trace to a log of its own (under TORCH_DTRACE), whose stacks name files interned in the logs
    before it, so a directory of rank-less logs is read in the order torch wrote them."""
    try:
        with _open(file) as fh:
            first = fh.readline(200)
    except READ_ERRORS:
        first = ""
    return (first[1:22] if PREFIX.match(first) else "~", file.name)


# A TORCH_TRACE directory holds one log per rank (or a few folders of them): a walk that meets more
# entries than this, or goes deeper, was given some other folder (`tcx explain /`, a home directory).
MAX_ENTRIES = 10_000
MAX_DEPTH = 4


def _regular_files(folder: Path) -> Iterator[Path]:
    """Non-empty regular files under `folder` (at most MAX_DEPTH folders down), links not followed:
    a FIFO, a device or a /proc directory (its files report size 0) can never block or loop the
    walk, and a walk past MAX_ENTRIES entries stops with an error instead of reading a whole disk."""
    from tcx.core.ingest.source_roots import in_pseudo_filesystem

    pending, seen = [(folder, 0)], 0
    while pending:
        where, depth = pending.pop()
        try:
            entries = list(os.scandir(where))
        except OSError:  # unreadable, or gone since it was listed
            continue
        seen += len(entries)
        if seen > MAX_ENTRIES:
            raise InputError(
                f"{str(folder)!r} is not a TORCH_TRACE log directory: it holds over {MAX_ENTRIES:,} "
                f"files and folders.",
                hint="Give the folder TORCH_TRACE named (its logs), or one log file.",
            )
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if stat.S_ISDIR(st.st_mode) and depth < MAX_DEPTH and not in_pseudo_filesystem(entry.path):
                pending.append((Path(entry.path), depth + 1))
            elif not entry.name.startswith(".") and stat.S_ISREG(st.st_mode) and st.st_size > 0:
                yield Path(entry.path)


def _open(file: Path) -> IO[str]:
    with file.open("rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(file, "rt", encoding="utf-8", errors="replace")
    return file.open("r", encoding="utf-8", errors="replace")


def _read_file(file: Path, rank: int | None) -> tuple[list[dict[str, Any]], list[str]]:
    """The eager reader: every payload read into memory (large ones zlib-packed)."""
    events: list[dict[str, Any]] = []
    tally = Tally(file, rank)
    current: dict[str, Any] | None = None
    payload: list[str] = []

    def finish() -> None:
        if current is not None:
            md5 = current["md"].pop("has_payload", None)
            text = "".join(payload) if md5 is not None or payload else None
            if text is not None and not _payload_intact(text, md5):
                tally.checksum_failed(current["source_line"])
            current["payload"] = pack(text) if text is not None else None
            events.append(current)

    try:
        with _open(file) as fh:
            for lineno, line in enumerate(fh, start=1):
                if line.startswith("\t"):
                    if current is not None:
                        payload.append(line[1:])
                    continue
                m = PREFIX.match(line)
                if not m:
                    tally.junk(line, lineno)
                    continue
                finish()
                md = tally.metadata(line[m.end() :], lineno)
                current = None if md is None else {"kind": "trace", "md": md, "source_line": lineno}
                payload = []
            finish()
    except READ_ERRORS as exc:
        tally.unreadable(exc)
    return events, tally.close()
