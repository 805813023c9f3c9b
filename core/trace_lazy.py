"""Lazy TORCH_TRACE reading: keep where each payload is, not the payload, and read it on demand.

A log is scanned in chunks of CHUNK bytes, never held whole: a regular expression (in C) finds
the lines that do not start with a tab (records, and lines that are no record), the records are
parsed and checked exactly as the eager reader (core/trace_log.py) does, and each payload
becomes a `PayloadRef` (file, byte offset, length) whose checksum is verified during the scan.
A view that needs a payload reads it then (`TraceEvent.payload`), from disk.

gzip logs are decompressed once, during the scan, into an anonymous temporary file (it goes
when tcx exits), so payloads are read from plain bytes too; a compressed stream cannot be
seeked. The log must not be rewritten while tcx reads it: a plain file stays open while its
payloads are referenced (a file that is deleted meanwhile is still read).

Reading a payload gives the same text as the eager reader: UTF-8 with invalid bytes replaced,
line ends made `\\n`, each line's leading tab removed, lines with no tab (no record, blank)
left out. The metadata is kept with each distinct string stored once (`shared`): on a large log
the records' metadata, not the payloads, is what fills memory.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

CHUNK = 8 << 20
SHARE_ABOVE = 128 << 20  # input bytes above which metadata strings are stored once (`shared`)
# The newline before a line that does not start with a tab (a record, a blank line, no record);
# a literal first character lets the regex engine skip ahead fast.
_BOUNDARY = re.compile(rb"\n(?!\t)")


class PayloadFile:
    """The bytes a log's payloads are read from: the log itself, or its decompressed copy.

    The last few payload texts read are kept (at most CACHE_BYTES): views often read the same
    payload twice in a row (`if ev.payload: parse(ev.payload)`)."""

    CACHE_ITEMS, CACHE_BYTES = 16, 8 << 20

    def __init__(self, fh: IO[bytes], name: str) -> None:
        self._fh = fh
        self.name = name
        self._lock = threading.Lock()
        self._cache: OrderedDict[int, tuple[str, int]] = OrderedDict()
        self._cached = 0

    def read(self, offset: int, length: int) -> bytes:
        with self._lock:
            return os.pread(self._fh.fileno(), length, offset)

    def text(self, offset: int, length: int) -> str:
        with self._lock:
            hit = self._cache.get(offset)
            if hit is not None:
                self._cache.move_to_end(offset)
                return hit[0]
        text = payload_text(self.read(offset, length))
        if length <= self.CACHE_BYTES // 4:
            with self._lock:
                if offset not in self._cache:
                    self._cache[offset] = (text, length)
                    self._cached += length
                while len(self._cache) > self.CACHE_ITEMS or self._cached > self.CACHE_BYTES:
                    _, (_, size) = self._cache.popitem(last=False)
                    self._cached -= size
        return text

    def size(self) -> int:
        return os.fstat(self._fh.fileno()).st_size

    def write(self, data: bytes) -> None:
        """Append to the decompressed copy; flushed, so `read` (pread) sees it at once."""
        self._fh.write(data)
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


@dataclass(frozen=True, slots=True, eq=False)
class PayloadRef:
    """A payload left on disk: `length` bytes at `offset` of `store` (tab-indented lines).

    It stands for its text: equal to another ref or a string with the same text."""

    store: PayloadFile
    offset: int
    length: int

    def read(self) -> str:
        return self.store.text(self.offset, self.length)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PayloadRef):
            return (other.store, other.offset) == (self.store, self.offset) or other.read() == self.read()
        return isinstance(other, str) and other == self.read()

    __hash__ = None  # type: ignore[assignment]  # equal by text, like the str it stands for

    def __len__(self) -> int:
        """The payload's size on disk (tabs and newlines included): what a view would print."""
        return self.length


def payload_text(raw: bytes) -> str:
    """Tab-indented payload lines as the payload text (see the module docstring)."""
    text = raw.decode("utf-8", errors="replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if "\n\t" not in text or not text.startswith("\t") or _has_untabbed(text):
        return "".join(line[1:] for line in text.splitlines(keepends=True) if line.startswith("\t"))
    return text[1:].replace("\n\t", "\n")


def _has_untabbed(text: str) -> bool:
    """A line inside the payload span that does not start with a tab (blank, or no record)."""
    body = text[:-1] if text.endswith("\n") else text
    return body.count("\n") != body.count("\n\t")


def _intact(raw: bytes, md5: str, all_tabbed: bool) -> bool:
    """The payload against the md5 torch put in `has_payload` (the last newline is the record's).
    Torch hashed the payload's UTF-8 bytes: when every line is tab-indented (the scan saw no other
    line in the span) they are the file's bytes less the tabs, hashed without decoding."""
    body = raw[:-1] if raw.endswith(b"\n") else raw
    if all_tabbed and raw.startswith(b"\t") and b"\r" not in raw:
        return hashlib.md5(body[1:].replace(b"\n\t", b"\n"), usedforsecurity=False).hexdigest() == md5
    text = payload_text(raw)
    text = text[:-1] if text.endswith("\n") else text
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest() == md5


def _has_tab_line(raw: bytes) -> bool:
    return raw.startswith(b"\t") or b"\n\t" in raw


def scan_file(
    file: Path, rank: int | None, strings: dict[str, str] | None = None
) -> tuple[list[dict], list[str]]:
    """The events of one log, payloads as PayloadRefs; the same events and problems as the eager
    reader (core/trace_log._read_file). With `strings` (one dict for the files of a directory)
    the metadata's strings are stored once (`shared`): worth its time on large logs only."""
    from tcx.core.trace_log import _PREFIX, _Tally

    tally = _Tally(file, rank)
    events: list[dict] = []
    try:
        source, store, copy = _source(file)
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        tally.unreadable(exc)
        return events, tally.close()
    current: dict | None = None
    start = 0  # file offset where `current`'s payload span starts
    all_tabbed = True  # no line without a tab (blank, no record) in the span so far
    lineno = 0

    def finish(end: int) -> None:
        if current is None:
            return
        md5 = current["md"].get("has_payload")
        checked = isinstance(md5, str) and len(md5) == 32
        raw = store.read(start, end - start) if end > start and (checked or md5 is None) else b""
        if md5 is None and not _has_tab_line(raw):
            current["payload"] = None
        else:
            if checked and not _intact(raw, md5, all_tabbed):
                tally.checksum_failed(current)
            current["payload"] = PayloadRef(store, start, max(end - start, 0))
        events.append(current)

    try:
        for base, buf in _chunks(source, store if copy else None):
            pos = 0  # where the lines not yet counted start
            for at in _line_starts(buf):
                end = buf.index(b"\n", at) + 1
                lineno += buf.count(b"\n", pos, at) + 1
                pos = end
                line = buf[at:end].decode("utf-8", errors="replace")
                if "\r" in line:
                    line = line.replace("\r\n", "\n").replace("\r", "\n")
                pm = _PREFIX.match(line)
                if not pm:
                    tally.junk(line, lineno)
                    all_tabbed = False
                    continue
                finish(base + at)
                current, start, all_tabbed = tally.record(line[pm.end() :], lineno), base + end, True
                if current is not None and strings is not None:
                    current["md"] = shared(current["md"], strings)
            lineno += buf.count(b"\n", pos)
        finish(store.size())
    except (OSError, EOFError, gzip.BadGzipFile) as exc:
        tally.unreadable(exc)  # the record being read is dropped, as the eager reader does
    return events, tally.close()


_EMPTY: dict = {}  # the one empty object of the metadata (records are read, never changed)


def shared(value: Any, strings: dict[str, str]) -> Any:
    """`value` (decoded JSON) with every string replaced by the one equal string seen before: a
    job's records repeat the same keys, file names, configs (25 KB each in compilation_metrics),
    stacks and dtypes thousands of times, and each JSON decode makes new copies of them."""
    kind = type(value)
    if kind is str:
        return strings.setdefault(value, value)
    if kind is dict:
        if not value:
            return _EMPTY  # e.g. every chromium_event's body
        return {strings.setdefault(k, k): shared(v, strings) for k, v in value.items()}
    if kind is list:
        return [shared(v, strings) for v in value]
    return value


def _line_starts(buf: bytes) -> Iterator[int]:
    """Offsets in `buf` (whole lines) of the lines that do not start with a tab."""
    if buf[:1] != b"\t":
        yield 0
    size = len(buf)
    for m in _BOUNDARY.finditer(buf):
        if m.end() < size:
            yield m.end()


def _source(file: Path) -> tuple[IO[bytes], PayloadFile, bool]:
    """(the stream to scan, where payloads will be read from, whether the scan copies to it)."""
    with file.open("rb") as fh:
        magic = fh.read(2)
    if magic != b"\x1f\x8b":
        plain = file.open("rb")  # stays open as long as its payloads are referenced
        return plain, PayloadFile(plain, str(file)), False
    tmp = tempfile.TemporaryFile(prefix="tcx-log-")  # noqa: SIM115 - lives as long as its payloads
    return gzip.open(file, "rb"), PayloadFile(tmp, str(file)), True


def _chunks(source: IO[bytes], copy_to: PayloadFile | None) -> Iterator[tuple[int, bytes]]:
    """(offset, bytes) of whole lines, about CHUNK at a time; a gzip stream is copied to `copy_to`
    as it is read. The last line gets a newline when the file ends without one. A stream that
    breaks off (a truncated gzip) yields the whole lines before the break, then raises."""
    base, carry = 0, b""
    try:
        while True:
            data, error = _read_some(source)
            if copy_to is not None and data:
                copy_to.write(data)
            buf = carry + data
            if error is not None or not data:
                if error is None and buf:
                    buf += b"\n"
                cut = buf.rfind(b"\n") + 1
                if cut:
                    yield base, buf[:cut]
                if error is not None:
                    raise error
                return
            cut = buf.rfind(b"\n") + 1
            if cut == 0:
                carry = buf
                continue
            yield base, buf[:cut]
            base += cut
            carry = buf[cut:]
    finally:
        if copy_to is not None:
            source.close()


def _read_some(source: IO[bytes]) -> tuple[bytes, Exception | None]:
    """About CHUNK bytes, and the error that stopped the stream early (what came before it is kept)."""
    parts: list[bytes] = []
    size = 0
    read1 = getattr(source, "read1", source.read)
    try:
        while size < CHUNK:
            part = read1(CHUNK - size)
            if not part:
                break
            parts.append(part)
            size += len(part)
    except (OSError, EOFError) as exc:  # gzip.BadGzipFile is an OSError
        return b"".join(parts), exc
    return b"".join(parts), None
