"""The run model's typed facts: frames, compiles, graph breaks, recompiles, source snapshots.

Pure and torch-free. Counts mean what PyTorch means (see DESIGN.md's JSON contract).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tcx.core.frames import frame_origin
from tcx.core.torchtext import names


@dataclass
class Frame:
    file: str
    line: int | None
    name: str
    code: str = ""

    @property
    def origin(self) -> str:
        return frame_origin(self.file)

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.file,
            "line": self.line,
            "function": self.name,
            "code": self.code,
            "origin": self.origin,
        }


@dataclass
class Compile:
    """One compile id (frame_id/frame_compile_id): Dynamo's attempt(s) at one frame."""

    compile_id: str
    frame_id: int | None = None
    co_name: str | None = None
    co_filename: str | None = None
    co_firstlineno: int | None = None
    attempts: int = 1
    # The attempts the log holds events of (0 always): the abandoned ones are these below the
    # last. An attempt number is data: the views walk these, never range(attempts).
    seen_attempts: frozenset[int] = frozenset({0})
    graph_count: int = 0
    graph_op_count: int | None = None
    guard_count: int | None = None
    fail_type: str | None = None
    fail_reason: str | None = None
    recompile_reason: str | None = None
    restart_reasons: list[str] = field(default_factory=list)
    stack: list[Frame] = field(default_factory=list)
    # The stack came from tcx's recorder (every caller); else from torch's `dynamo_start`, which
    # leaves out the direct caller of a torch.compile-wrapped function.
    full_stack: bool = False
    compile_time_s: float | None = None
    metrics: dict[str, Any] = field(default_factory=dict)  # its first compilation_metrics, as torch wrote it

    @property
    def is_resume(self) -> bool:
        return names.is_resume(self.co_name)

    @property
    def failed(self) -> bool:
        """The compile failed (Dynamo gave up, or the backend raised): the frame runs in eager Python."""
        return self.fail_type is not None

    @property
    def display_name(self) -> str:
        return names.display_name(self.co_name)


@dataclass
class GraphBreak:
    """One graph-break event (torch's `dynamo_graph_break_reason`), typed where the hook ran."""

    compile_id: str | None
    attempt: int
    gb_type: str
    gb_id: str | None
    explanation: str
    hints: list[str]
    debug_context: str
    file: str | None
    line: int | None
    user_stack: list[Frame]
    frame_skipped: bool
    caused: list[tuple[str, str | None]]  # further breaks this one triggered, e.g. "graph break in loop"
    frame: str | None = None  # the code object being traced
    typed: bool = False  # fields came from the typed hook, not only from text
    not_converted: str | None = None  # torch's "WON'T CONVERT <function>" record, not a break the hook saw

    @property
    def key(self) -> tuple[str, str | None, int | None]:
        return (self.gb_type, self.file, self.line)


@dataclass(frozen=True)
class Recompile:
    """One recompile (what `TORCH_LOGS=recompiles` prints): the compile it started and torch's
    reason, from the `recompile_reasons` artifact, or from `compilation_metrics` on older torch."""

    compile_id: str | None
    reason: str  # the failing guard of each cache entry, a line each
    payload: str = ""  # as torch logged it: the artifact's JSON list, or the metrics' text
    frame_id: int | None = None


@dataclass
class Sources:
    """The program's source files a report may quote, as the recording holds them.

    A recording or log is input from anywhere and may name any path: its lines are shown from
    the text snapshot taken at record time, or from a file on disk inside the program's recorded
    `roots` whose sha256 is the recorded one, or inside a folder the user gave (`user_roots`,
    --source-root); see core/ingest/source_roots.py. A live run just ran the files on disk.
    """

    texts: dict[str, str] = field(default_factory=dict)
    sha256: dict[str, str] = field(default_factory=dict)
    live: bool = False
    roots: tuple[str, ...] = ()
    user_roots: tuple[str, ...] = ()


def resume_target(comp: Compile) -> tuple[str, int] | None:
    """For a resume function's compile: (original function, line it resumed at)."""
    return names.parse_resume(comp.co_name)


@dataclass(frozen=True, slots=True)
class Milestone:
    """A compile's mark in log order: its start (`dynamo_start`), a graph-break record, its end
    (`compilation_metrics`). Torch logs these facts twice (its counters and its records), so what a
    log lost shows when they disagree (core/analysis/log_consistency.py)."""

    kind: str  # "start", "break" or "end"
    compile_id: str | None
    rank: int | None
