"""Read TORCH_TRACE logs (a file, or a directory of per-rank files) into a Recording.

Each record is a glog-prefixed line whose JSON is the structured-trace metadata, followed
by the payload as tab-indented lines. The events become `trace` events, exactly like the
live recorder writes, so every view works the same on logs. Nothing is executed; bad
lines are reported with file and line and the rest is still read.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import re
from pathlib import Path
from typing import IO

from tcx.core.errors import InputError
from tcx.core.recording import Recording
from tcx.core.trace_events import pack, unpack

_PREFIX = re.compile(r"^[VIWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+ +\d+ [^\]]*\] ")
_RANK = re.compile(r"rank_(\d+)")


def load_trace(path: str | Path) -> Recording:
    path = Path(path)
    files = _log_files(path)
    events: list[dict] = []
    problems: list[str] = []
    torch_version = None
    for file in files:
        rank_match = _RANK.search(file.name)
        rank = int(rank_match.group(1)) if rank_match and len(files) > 1 else None
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
    for ev in events:
        tv = ev["md"].get("artifact", {}) if isinstance(ev["md"].get("artifact"), dict) else {}
        if tv.get("name") == "torch_version" and ev.get("payload"):
            torch_version = _torch_version(unpack(ev["payload"]) or "")
    header = {
        "format": "torch-trace",
        "target": str(path),
        "files": [str(f) for f in files],
        "torch_version": torch_version,
    }
    return Recording(header=header, events=events, problems=problems, source=str(path))


def _torch_version(payload: str) -> str:
    """torch 2.13+ writes {"pytorch_version": ..., "commit": ...}; older builds wrote the bare version."""
    try:
        value = json.loads(payload)
    except ValueError:
        return payload.strip()
    if isinstance(value, dict):
        return str(value.get("pytorch_version") or payload.strip())
    return str(value).strip()


def _payload_intact(payload: str, md: dict) -> bool:
    """Check a payload against the md5 torch put in `has_payload` (the last newline is the record's)."""
    md5 = md.get("has_payload")
    if not (isinstance(md5, str) and len(md5) == 32):
        return True
    text = payload[:-1] if payload.endswith("\n") else payload
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest() == md5


def _log_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        if not files:
            raise InputError(f"{str(path)!r} is an empty directory: no TORCH_TRACE logs in it.")
        return files
    if not path.exists():
        raise InputError(f"no such file: {str(path)!r}.")
    return [path]


def _open(file: Path) -> IO[str]:
    with file.open("rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(file, "rt", encoding="utf-8", errors="replace")
    return file.open("r", encoding="utf-8", errors="replace")


def _read_file(file: Path, rank: int | None) -> tuple[list[dict], list[str]]:
    events: list[dict] = []
    problems: list[str] = []
    current: dict | None = None
    payload: list[str] = []
    bad_run = 0

    def finish() -> None:
        if current is not None:
            current["payload"] = (
                "".join(payload) if current["md"].get("has_payload") is not None or payload else None
            )
            if current["payload"] is not None and not _payload_intact(current["payload"], current["md"]):
                line = current["source_line"]
                problems.append(f"{file.name}:{line}: payload does not match its checksum (corrupted?)")
            if current["payload"] is not None:
                current["payload"] = pack(current["payload"])
            events.append(current)

    try:
        with _open(file) as fh:
            for lineno, line in enumerate(fh, start=1):
                if line.startswith("\t"):
                    if current is not None:
                        payload.append(line[1:])
                    continue
                m = _PREFIX.match(line)
                if not m:
                    if line.strip():
                        bad_run += 1
                        if bad_run <= 3:
                            problems.append(f"{file.name}:{lineno}: not a trace record")
                    continue
                finish()
                current, payload = None, []
                try:
                    md = json.loads(line[m.end() :])
                except ValueError as exc:
                    problems.append(f"{file.name}:{lineno}: corrupted JSON ({exc.msg} at column {exc.colno})")
                    continue
                if not isinstance(md, dict):
                    problems.append(f"{file.name}:{lineno}: trace record is not a JSON object")
                    continue
                if rank is not None and "rank" not in md:
                    md["rank"] = rank
                current = {"kind": "trace", "md": md, "source_line": lineno}
            finish()
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        problems.append(f"{file.name}: cannot read ({exc})")
    if bad_run > 3:
        problems.append(f"{file.name}: {bad_run} lines in all were not trace records")
    return events, problems
