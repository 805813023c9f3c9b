"""Lazy TORCH_TRACE reading: keep where each payload is, not the payload, and read it on demand.

A log is scanned in chunks of CHUNK bytes, never held whole: a regular expression (in C) finds
the lines that do not start with a tab (records, and lines that are no record), the records are
parsed and checked exactly as the eager reader (core/ingest/trace_log.py) does, and each payload
becomes a `PayloadRef` (file, byte offset, length) whose checksum is verified during the scan.
A view that needs a payload reads it then (`TraceEvent.payload`), from disk. Each record is one
`LogRecord`, which is also its TraceEvent; payloads of at most INLINE_BYTES are kept as text.

gzip logs are decompressed once, during the scan, into an anonymous temporary file (it goes
when tcx exits), so payloads are read from plain bytes too; a compressed stream cannot be
seeked. The log must not be rewritten while tcx reads it: a plain file stays open while its
payloads are referenced (a file that is deleted meanwhile is still read).

Reading a payload gives the same text as the eager reader: UTF-8 with invalid bytes replaced,
line ends made `\\n`, each line's leading tab removed, lines with no tab (no record, blank)
left out. On a large log the records' metadata, not the payloads, is what fills memory: what
repeats is stored once (`shared` strings, one dict per repeated context line), and the bulky
`describe_*` metadata stays on disk (LazyMetadata).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from tcx.core.errors import READ_ERRORS
from tcx.core.ingest.event_schema import decode_json
from tcx.core.ingest.trace_events import TraceEvent, compile_id_of, event_key, event_name

CHUNK = 8 << 20
# Payloads up to this size are kept as text: a `chromium_event`'s timer, read by the compile-time
# views thousands of times, costs less as a short string than as a reference read from disk.
INLINE_BYTES = 256
SHARE_ABOVE = 128 << 20  # input bytes above which metadata strings are stored once (`shared`)
# The newline before a line that does not start with a tab (a record, a blank line, no record);
# a literal first character lets the regex engine skip ahead fast.
_BOUNDARY = re.compile(rb"\n(?!\t)")
_LENGTH_BITS = 40  # a payload's length in the low bits of PayloadRef.where, its offset above
_LENGTH_MASK = (1 << _LENGTH_BITS) - 1


class PayloadFile:
    """The bytes a log's payloads are read from: the log itself, or its decompressed copy.

    The last few payload texts read are kept (at most CACHE_BYTES): views often read the same
    payload twice in a row (`if ev.payload: parse(ev.payload)`)."""

    CACHE_ITEMS, CACHE_BYTES, UNCACHED_BYTES = 16, 8 << 20, 4096

    def __init__(self, fh: IO[bytes], name: str) -> None:
        self._fh = fh
        self.name = name
        self._lock = threading.Lock()
        self._cache: OrderedDict[int, tuple[str, int]] = OrderedDict()
        self._cached = 0

    def read(self, offset: int, length: int) -> bytes:
        return os.pread(self._fh.fileno(), length, offset)  # positional: safe from any thread

    def text(self, offset: int, length: int) -> str:
        if length <= self.UNCACHED_BYTES:  # cheaper to read again than to cache
            return payload_text(self.read(offset, length))
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
    """A payload left on disk: `length` bytes at `offset` of `store` (tab-indented lines), both
    in one int (`where`): a large log has hundreds of thousands of them.

    It stands for its text: equal to another ref or a string with the same text."""

    store: PayloadFile
    where: int  # offset << _LENGTH_BITS | length

    @property
    def offset(self) -> int:
        return self.where >> _LENGTH_BITS

    @property
    def length(self) -> int:
        return self.where & _LENGTH_MASK

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


def _intact(raw: bytes, md5: str, all_tabbed: bool, lines: int) -> bool:
    """The payload (`lines` lines) against the md5 torch put in `has_payload` (the last newline
    is the record's). Torch hashed the payload's UTF-8 bytes: when every line is tab-indented (the
    scan saw no other line in the span) they are the file's bytes less the tabs, hashed without
    decoding; with no tab but those (as many tabs as lines), every tab goes (`translate`, twice
    as fast as replacing each newline-tab)."""
    body = raw[:-1] if raw.endswith(b"\n") else raw
    if all_tabbed and raw.startswith(b"\t") and b"\r" not in raw:
        only_indents = raw.count(b"\t") == lines
        plain = body.translate(None, b"\t") if only_indents else body[1:].replace(b"\n\t", b"\n")
        return hashlib.md5(plain, usedforsecurity=False).hexdigest() == md5
    text = payload_text(raw)
    text = text[:-1] if text.endswith("\n") else text
    return hashlib.md5(text.encode("utf-8"), usedforsecurity=False).hexdigest() == md5


def _has_tab_line(raw: bytes) -> bool:
    return raw.startswith(b"\t") or b"\n\t" in raw


class LogRecord(TraceEvent):
    """One record of a log, read straight into its TraceEvent; it also answers as the event dict
    the eager reader makes (`kind` "trace", `md`, `payload`, `source_line`), which is what a
    recording's events are. A large log has hundreds of thousands of records, most of them small
    (`chromium_event`, `describe_*`): one object each, not a dict and an event."""

    __slots__ = ("source_line",)
    _KEYS = ("kind", "md", "source_line", "payload")

    def __init__(
        self,
        name: str | None,
        md: dict[str, Any] | LazyMetadata,
        payload: str | PayloadRef | None,
        source_line: int,
    ) -> None:
        context = md if isinstance(md, dict) else md.context
        attempt = context.get("attempt")
        super().__init__(
            name
            or "",  # a record of context keys only: kept, as the eager reader keeps it; the model skips it
            md,
            payload,
            compile_id_of(context),
            attempt if isinstance(attempt, int) else 0,
            context.get("rank"),
        )
        self.source_line = source_line

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in self._KEYS else default

    def __getitem__(self, key: str) -> Any:
        if key == "kind":
            return "trace"
        if key in self._KEYS:
            return getattr(self, "packed" if key == "payload" else key)
        raise KeyError(key)

    def __contains__(self, key: object) -> bool:
        return key in self._KEYS

    def __eq__(self, other: object) -> bool:
        """Equal to the eager reader's event dict (or another record) for the same line."""
        if not isinstance(other, (LogRecord, Mapping)):
            return NotImplemented
        return all(self[k] == other.get(k) for k in self._KEYS)

    __hash__ = None  # type: ignore[assignment]


class LazyMetadata:
    """The metadata of a bulky record that no view reads but on request (`describe_tensor`,
    `describe_storage`, `describe_source`: one per input tensor of every compile, a third of a
    large log's records): checked during the scan, then read again from disk when asked for.
    `context` keeps what places the record (frame, compile, attempt, rank); `kept` the body's
    fields that views read for every such record (KEPT_FIELDS), so they need no disk read."""

    __slots__ = ("context", "kept", "store", "where")

    def __init__(self, store: PayloadFile, where: int, context: dict[str, Any], kept: dict[str, str]) -> None:
        self.store, self.where, self.context, self.kept = store, where, context, kept

    def load(self) -> dict[str, Any]:
        raw = self.store.read(self.where >> _LENGTH_BITS, self.where & _LENGTH_MASK)
        md: dict[str, Any] = decode_json(raw.decode("utf-8", errors="replace"))
        md.pop("has_payload", None)
        if "rank" in self.context and "rank" not in md:
            md["rank"] = self.context["rank"]
        return md


LAZY_METADATA = frozenset({"describe_tensor", "describe_storage", "describe_source"})
# Fields of a lazy record's body kept in memory (text only): the run's device
# (core/model/status.py) reads every tensor's.
KEPT_FIELDS = {"describe_tensor": ("device",)}
_CONTEXT_KEYS = ("frame_id", "frame_compile_id", "attempt", "compiled_autograd_id", "rank")


# The md5 torch appends to a record's metadata; stripped, the rest is the key of repeated metadata.
_MD5_TAIL = re.compile(r', "has_payload": "([0-9a-f]{32})"}$')


def scan_file(
    file: Path, rank: int | None, strings: dict[str, str] | None = None
) -> tuple[list[LogRecord], list[str]]:
    """The events of one log, payloads left on disk; the same events and problems as the eager
    reader (core/ingest/trace_log._read_file). With `strings` (one dict for the files of a directory)
    the metadata's strings are stored once (`shared`): worth its time on large logs only.

    What repeats is stored once, and bulky records keep their metadata on disk
    (_MetadataReader)."""
    from tcx.core.ingest.trace_lines import Tally

    tally = Tally(file, rank)
    try:
        source, store, copy = _source(file)
    except READ_ERRORS as exc:
        tally.unreadable(exc)
        return [], tally.close()
    events = _scan(tally, store, _chunks(source, store if copy else None), strings)
    return events, tally.close()


def _scan(
    tally: Any, store: PayloadFile, chunks: Iterator[tuple[int, bytes]], strings: dict[str, str] | None
) -> list[LogRecord]:
    """The records in `chunks` (whole lines of the log, in order; the last payload ends where
    `store` ends once it is read: a gzip log's copy grows while it is read)."""
    from tcx.core.ingest.trace_lines import PREFIX

    events: list[LogRecord] = []
    meta = _MetadataReader(tally, store, strings)
    md: dict[str, Any] | LazyMetadata | None = None  # the record being read: its metadata, name, md5, line
    name: str | None = None
    md5: str | None = None
    md_line = 0
    start = 0  # file offset where the record's payload span starts
    all_tabbed = True  # no line without a tab (blank, no record) in the span so far
    lineno = 0

    def finish(end: int, lines: int) -> None:
        if md is None:
            return
        checked = isinstance(md5, str) and len(md5) == 32
        raw = store.read(start, end - start) if end > start and (checked or md5 is None) else b""
        payload: str | PayloadRef | None = None
        if md5 is not None or _has_tab_line(raw):
            if md5 is not None and checked and not _intact(raw, md5, all_tabbed, lines):
                tally.checksum_failed(md_line)
            if raw and len(raw) <= INLINE_BYTES:
                payload = payload_text(raw)
            else:
                payload = PayloadRef(store, (start << _LENGTH_BITS) | max(end - start, 0))
        events.append(LogRecord(name, md, payload, md_line))

    try:
        for base, buf in chunks:
            pos = 0  # where the lines not yet counted start
            for at in _line_starts(buf):
                end = buf.index(b"\n", at) + 1
                lineno += buf.count(b"\n", pos, at) + 1
                pos = end
                line = buf[at:end].decode("utf-8", errors="replace")
                if "\r" in line:
                    line = line.replace("\r\n", "\n").replace("\r", "\n")
                pm = PREFIX.match(line)
                if not pm:
                    tally.junk(line, lineno)
                    all_tabbed = False
                    continue
                finish(base + at, lineno - md_line - 1)
                start, all_tabbed, md_line = base + end, True, lineno
                name, md, md5 = meta.read(line, pm.end(), base + at, end - at, lineno)
            lineno += buf.count(b"\n", pos)
        finish(store.size(), lineno - md_line)
    except READ_ERRORS as exc:
        tally.unreadable(exc)  # the record being read is dropped, as the eager reader does
    return events


class _MetadataReader:
    """Record lines to metadata, with what repeats stored once: metadata whose event body is
    empty (`{"chromium_event": {}, "frame_id": 3, ...}`, torch repeats it for every such
    record of a compile) is decoded and checked once per distinct line (less the md5), and its
    records share one dict; LAZY_METADATA records keep theirs on disk (LazyMetadata), with
    one context dict per compile."""

    REPEATED_MAX = 100_000  # distinct repeated lines kept per log (a few per compile)

    def __init__(self, tally: Any, store: PayloadFile, strings: dict[str, str] | None) -> None:
        self.tally, self.store, self.strings = tally, store, strings
        self.repeated: dict[str, tuple[str | None, dict[str, Any]]] = {}
        self.contexts: dict[tuple[Any, ...], dict[str, Any]] = {}
        self.kept: dict[tuple[tuple[str, str], ...], dict[str, str]] = {}

    def read(
        self, line: str, json_at: int, offset: int, size: int, lineno: int
    ) -> tuple[str | None, dict[str, Any] | LazyMetadata | None, Any]:
        """(event name, metadata, md5) of the record line at `offset` (`size` bytes) of the file,
        its JSON from character `json_at`; metadata None when the line was reported as bad."""
        text = line[json_at:].rstrip("\n")
        tail = _MD5_TAIL.search(text)
        key = text[: tail.start()] + "}" if tail else text
        hit = self.repeated.get(key)
        if hit is not None:
            return hit[0], hit[1], tail.group(1) if tail else None
        md = self.tally.metadata(text, lineno)
        if md is None:
            return None, None, None
        md5 = md.pop("has_payload", None)
        name = event_name(md)
        if name in LAZY_METADATA:
            head = len(line[:json_at].encode("utf-8"))
            where = ((offset + head) << _LENGTH_BITS) | (size - head)
            return name, LazyMetadata(self.store, where, self._context(md), self._kept(name, md)), md5
        if self.strings is not None:
            md = shared(md, self.strings)
        if md.get(event_key(md)) == {} and len(self.repeated) < self.REPEATED_MAX:
            self.repeated[key] = (name, md)
        return name, md, md5

    def _kept(self, name: str, md: dict[str, Any]) -> dict[str, str]:
        body = md.get(name)
        fields = KEPT_FIELDS.get(name, ())
        if not isinstance(body, dict) or not fields:
            return _EMPTY
        kept = tuple((k, body[k]) for k in fields if isinstance(body.get(k), str))
        known = self.kept.get(kept)  # a few distinct values (devices) per log: one dict each
        if known is None:
            known = self.kept[kept] = dict(kept)
        return known

    def _context(self, md: dict[str, Any]) -> dict[str, Any]:
        values = tuple(md.get(k) for k in _CONTEXT_KEYS)
        context = self.contexts.get(values)
        if context is None:
            context = self.contexts[values] = {k: md[k] for k in _CONTEXT_KEYS if k in md}
        return context


_EMPTY: dict[str, Any] = {}  # the one empty object of the metadata (records are read, never changed)


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


def _source(file: Path) -> tuple[io.BufferedIOBase, PayloadFile, bool]:
    """(the stream to scan, where payloads will be read from, whether the scan copies to it)."""
    with file.open("rb") as fh:
        magic = fh.read(2)
    if magic != b"\x1f\x8b":
        plain = file.open("rb")  # stays open as long as its payloads are referenced
        return plain, PayloadFile(plain, str(file)), False
    tmp = tempfile.TemporaryFile(prefix="tcx-log-")  # noqa: SIM115 - lives as long as its payloads
    return gzip.open(file, "rb"), PayloadFile(tmp, str(file)), True


def _chunks(source: io.BufferedIOBase, copy_to: PayloadFile | None) -> Iterator[tuple[int, bytes]]:
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


def _read_some(source: io.BufferedIOBase) -> tuple[bytes, BaseException | None]:
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
    except READ_ERRORS as exc:
        return b"".join(parts), exc
    return b"".join(parts), None
