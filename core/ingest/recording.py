"""The recording: an append-only, versioned event log, one JSON object per line.

Line 1 is the header; every later line is an event with a "kind":

    run_start     torch/python versions, backend used and why, capture features available
    trace         one structured-trace event exactly as torch emitted it: "md" (metadata) and
                  "payload" (string or null); the same events TORCH_TRACE writes to its logs
    graph_break   typed fields from Dynamo's graph-break hook (gb_type, user stack ...)
    compile_call  a torch.compile() call in the program: what it asked for, what tcx used
    compile_seen  a frame Dynamo started compiling, seen by tcx's own hook: its compile_id (the
                  structured trace must hold records of it, or capture was lost)
    call          a call tcx made itself for a `script.py:func --call` target
    log           a torch log record (warnings that would otherwise go to stderr)
    program_exit  how the program ended, written by the recorder child
    outcome       how the child process ended, written by the parent (signal, timeout)
    source        a user file the report quotes, written by the parent after the run: file,
                  text (its content then) and sha256; a file over 1 MB has the sha256 only
    child_process one per child process of the program that compiled (core/run/observed.py), written
                  by the parent: pid, how (fork/spawn/forkserver/subprocess), argv, observed;
                  when observed its explain counts, graph_breaks[] sites and functions{name:
                  counts}; when not, the reason

Written by the `recompiles` capture (core/recorder/compat_recompiles.py), additive in format 1:

    recompile_config     the recompile limit's value and config name when the capture installed
    frame_call           one call of a torch.compile'd callable: index, function, file, line,
                         args (signature: shapes, dtypes, devices, requires_grad, Python values),
                         outcome (compile/hit/recompile/eager), entry (compile id that served or
                         was created), checked (entry ids in Dynamo's check order), config,
                         wraps (the callable the program compiled, when Dynamo evaluates a
                         frame torch put around it, e.g. for a `@torch.no_grad()` method)
    frame_calls_dropped  cache hits past the first 1000 calls are only counted: {"count": N,
                         "by_entry": {compile id of the entry that served them: N}}
    guard_check          a cache miss of a frame with entries: each entry's first failing guard
                         (check_verbose) and the actual values it read, for every frame
    what_if              after the run, one `--what-if` input checked against every entry

Written by the Dynamo captures (core/recorder/compat_dynamo.py), additive in format 1:

    trace_instructions   `instructions` capture, one per compile id and attempt: function, file,
                         instructions[] (depth, function, line, offset, opname, argval, stack
                         before it as strings, nodes[] created with final name / created_as /
                         erased / subgraph, guards installed, shape_guards, branch, graph_break,
                         exc), elided (past 50000), unattributed_nodes
    bytecode             `bytecode` capture, one per compiled frame: original and transformed
                         dis rows, transformed_source (+ original_source of a resume function)
                         decompiled by depyf or annotated dis (`*_how`), calls (graphs/resumes)
    guards               `guards` capture, one per new cache entry: Dynamo's guard list (kind,
                         source, text from the guard tree, user file/line/code), shape_env_guards,
                         epilogue (symbolic-shape guard text), tree (the guard tree as torch prints it)
    cache_entries        `guards` capture, after the run: per code object, the compile ids of
                         its cache entries still alive, most recently used first
    fusion               `fusion` capture, one per Scheduler.fuse_nodes: compile_id, graph
                         (forward/backward/inference), device, preview (CUDA preview's lowering),
                         nodes[] before fusion (name, type, kind, origins[] {node, op}, user_lines,
                         buffers, kernel for extern, size), groups[] after (name, type, members),
                         decisions[] ({kind: fuse|no_fuse, node1, node2, reason: WhyNoFuse text})
    fusion_note          `fusion` capture, a fusion decision logged outside fuse_nodes
    partitioner_log      `aot_graphs` capture, the min-cut partitioner's debug log line
    cuda_preview         `cuda_preview=sm_XX[+ptx]` capture, one per partitioned graph: arch,
                         compile_id, graph, devices (Inductor's device types for it), source (the
                         wrapper module Inductor generated for a fake CUDA device, kernels
                         embedded; none for a graph of CPU tensors only), seconds, error,
                         ptx {kernel: text}
    cuda_preview_device  the same capture, once: arch, assumptions[] (device properties, cuDNN),
                         notes[] (what this torch cannot preview)
    cuda_preview_decision  the same capture: a decision taken without a GPU (decision autotune |
                         pad_mm | sdpa, compile_id, graph, assumed, why, and its details), or a
                         compile that depends on values drawn from the CUDA generator (decision
                         random_values, compile_id, reads[] {how: branch|number|size, file, line,
                         function, code, drawn_at[] {op, file, line, ...}, value}, inputs[]
                         {input, shape, drawn_at[]})
    cuda_preview_note    the same capture: something the preview could not follow (note)
    cudagraph            `cudagraphs` capture (core/recorder/compat_cudagraphs.py): event
                         skip | partitions | decided | cudagraphified | captured, compile_id, graph

Written by `tcx numerics` (core/recorder/compat_numerics.py, compat_localize.py), additive in format 1:

    numerics_config      the numerics capture: role (compiled | eager), config applied, features
                         (None: installed, else why not: force_eager, calls, grads, float64_reference)
    numerics_probe       the localization run, one per compiled graph of the divergent call: compile_id,
                         backend, stages[] (each rung judged), stage, node (the first FX node off: name,
                         op, file, line, code, dtype, judgement), bisect (torch's CompilerBisector),
                         custom_passes, seconds, error
    numerics_report      written by the parent into the compiled run's recording after all its runs:
                         the report of core/numerics/report.py (verdict, calls[], gradients[],
                         parameters[], first_divergence, probes[], remedies[], runs[])

Events are flushed as they happen, so a crash, `sys.exit`, segfault or timeout keeps
everything recorded until then. Loading never executes code (JSON only, no pickle), and checks
every event against core/ingest/event_schema.py: a line that is not JSON, or an event with a field of the
wrong type, is reported with its file and line and skipped.

Format history:
    1  first version
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from tcx import __version__
from tcx.core.errors import READ_ERRORS, InputError
from tcx.core.ingest.event_schema import MAX_REPORTED, decode_json, drop_bad_header_fields, event_problem

if TYPE_CHECKING:
    from tcx.core.ingest.trace_lazy import LogRecord

FORMAT_NAME = "tcx-recording"
FORMAT_VERSION = 1


class RecordingWriter:
    """Appends events to a recording file; thread-safe, flushed per event."""

    def __init__(self, path: str | Path) -> None:
        self._fh: IO[str] = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the run
        self._lock = threading.Lock()

    def write(self, kind: str, **fields: Any) -> None:
        line = json.dumps({"kind": kind, **fields}, default=repr, ensure_ascii=False) + "\n"
        with self._lock:
            try:
                self._fh.write(line)
            except UnicodeEncodeError:  # raised before anything is written
                self._fh.write(escape_surrogates(line))
            self._fh.flush()

    def close(self) -> None:
        with self._lock:
            self._fh.close()


# A lone surrogate (e.g. `RuntimeError("x \udcff y")`, or a file name that is not UTF-8) cannot be
# written as UTF-8; it is kept visibly escaped, as the six characters `\udcff`.
_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_surrogates(json_text: str) -> str:
    """JSON text with each lone surrogate replaced by an escaped backslash and its code."""
    return _SURROGATE.sub(lambda m: f"\\\\u{ord(m.group()):04x}", json_text)


def write_header(path: str | Path, **fields: Any) -> None:
    """Start a new recording file with its header line."""
    header = {
        "kind": "header",
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "tcx_version": __version__,
        **fields,
    }
    line = escape_surrogates(json.dumps(header, ensure_ascii=False))
    Path(path).write_text(line + "\n", encoding="utf-8")


@dataclass
class Recording:
    """A loaded recording: its header, its events in order, and any lines that could not be read."""

    header: dict[str, Any]
    # the recorder's events (dicts); a log's records are LogRecords, which answer as the same dicts
    events: list[dict[str, Any] | LogRecord]
    problems: list[str] = field(default_factory=list)
    source: str = ""

    def of_kind(self, kind: str) -> Iterator[dict[str, Any] | LogRecord]:
        if kind == "trace":
            return (e for e in self.events if e.get("kind") == kind)
        # a log's records (core/ingest/trace_lazy.LogRecord) are all "trace": skipped without a lookup
        return (e for e in self.events if isinstance(e, dict) and e.get("kind") == kind)

    def first(self, kind: str) -> dict[str, Any] | LogRecord | None:
        return next(self.of_kind(kind), None)

    def end_with(self, events: list[dict[str, Any]], target: str) -> Recording:
        """This input with the events a run ends with appended (`outcome`, `program_exit`) and named
        after what ran: a command `tcx record` ran, whose processes wrote only their trace logs."""
        self.events += events
        self.header["target"] = target
        return self


def _open_text(path: Path) -> IO[str]:
    with path.open("rb") as fh:
        magic = fh.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8", errors="replace")
    return path.open("r", encoding="utf-8", errors="replace")


def load_recording(path: str | Path) -> Recording:
    """Read a recording; raise InputError when it is not one (or is from a newer tcx)."""
    path = Path(path)
    try:
        if not path.is_file():
            raise InputError(f"no such recording: {str(path)!r}.")
        with _open_text(path) as fh:
            first = fh.readline()
            header = _parse_header(first, path)
            events, problems = _read_events(fh, path)
    except READ_ERRORS as exc:
        raise InputError(f"cannot read {str(path)!r}: {exc}.") from None
    problems = [f"{path.name}:1: {p}" for p in drop_bad_header_fields(header)] + problems
    return Recording(header=header, events=events, problems=problems, source=str(path))


def _parse_header(line: str, path: Path) -> dict[str, Any]:
    try:
        header = decode_json(line)
    except ValueError:  # a line nested 100,000 deep too
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT_NAME:
        raise InputError(
            f"{str(path)!r} does not look like a tcx recording (its first line is not a tcx header).",
            hint="Recordings are written by `tcx ... --save FILE`; TORCH_TRACE logs are read as TARGET too.",
        )
    version = header.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InputError(
            f"{str(path)!r} is an unreadable recording: its header's format version is {repr(version)[:40]}, "
            "not a whole number from 1 (the file was damaged or not written by tcx)."
        )
    if version > FORMAT_VERSION:
        raise InputError(
            f"{str(path)!r} was written by a newer tcx (recording format {version!r}; "
            f"this tcx {__version__} reads up to {FORMAT_VERSION}). Upgrade tcx to read it."
        )
    return header


def _read_events(fh: IO[str], path: Path) -> tuple[list[dict[str, Any] | LogRecord], list[str]]:
    events: list[dict[str, Any] | LogRecord] = []  # a recording's are dicts
    problems: list[str] = []
    malformed = 0
    for lineno, line in enumerate(fh, start=2):
        if not line.strip():
            continue
        try:
            event = decode_json(line)
        except ValueError:
            tail = "" if line.endswith("\n") else " (truncated last line: the run was cut off)"
            problems.append(f"{path.name}:{lineno}: not a JSON event{tail}")
            continue
        if not isinstance(event, dict) or "kind" not in event:
            problems.append(f"{path.name}:{lineno}: not a tcx event")
            continue
        why = event_problem(event)
        if why is not None:
            malformed += 1
            if malformed <= MAX_REPORTED:
                kind = event["kind"] if isinstance(event["kind"], str) else "tcx"
                problems.append(f"{path.name}:{lineno}: malformed {kind} event skipped ({why})")
            continue
        events.append(event)
    if malformed > MAX_REPORTED:
        problems.append(f"{path.name}: {malformed} malformed events in all were skipped")
    return events, problems


def save_copy(src: str | Path, dest: str | Path) -> None:
    """Keep a recording at `dest`; a `.gz` suffix compresses it. A file at `dest` is replaced,
    never written through (a link there stays pointing where it pointed: core/files.py)."""
    from tcx.core.files import replacing

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(src, "rb") as fin, replacing(dest, "wb") as fout:
        if dest.suffix == ".gz":
            with gzip.GzipFile(filename=dest.name, mode="wb", fileobj=fout) as zipped:
                shutil.copyfileobj(fin, zipped)
        else:
            shutil.copyfileobj(fin, fout)
