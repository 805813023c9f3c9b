"""Follow a recording while the child writes it: which frame is compiling, in which stage.

The parent reads the new complete lines of the recording file on each tick; the CLI shows
the state as a live status line on a terminal (nothing when output is piped).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

# chromium_event phase names -> the stage a person would name
STAGES = {
    "dynamo": "Dynamo",
    "entire_frame_compile": "Dynamo",
    "backend_compile": "AOTAutograd",
    "aot_collect_metadata": "AOTAutograd",
    "create_aot_dispatcher_function": "AOTAutograd",
    "compile_fx_inner": "Inductor",
    "inductor_compile": "Inductor",
    "GraphLowering.run": "Inductor lowering",
    "Scheduler.__init__": "Inductor scheduling",
    "code_gen": "Inductor codegen",
    "compile_file": "C++/Triton compile",
    "async_compile.wait": "C++/Triton compile",
}


@dataclass
class Progress:
    started: float = field(default_factory=time.monotonic)
    frame: str | None = None
    compile_id: str | None = None
    stage: str | None = None
    compiles: int = 0
    graph_breaks: int = 0

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def describe(self) -> str:
        if self.frame is None:
            return f"running the program · {self.elapsed:.0f} s"
        stage = f" · {self.stage}" if self.stage else ""
        return (
            f"compiling {self.frame} ({self.compile_id}){stage} · {self.compiles} compile(s), "
            f"{self.graph_breaks} graph break(s) · {self.elapsed:.0f} s"
        )


class RecordingFollower:
    """Reads complete lines appended to a recording since the last call."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.pending = b""
        self.progress = Progress()

    def poll(self) -> Progress:
        try:
            with self.path.open("rb") as fh:
                fh.seek(self.offset)
                chunk = fh.read()
        except OSError:
            return self.progress
        self.offset += len(chunk)
        data = self.pending + chunk
        *lines, self.pending = data.split(b"\n")
        for line in lines:
            self._feed(line)
        return self.progress

    def _feed(self, line: bytes) -> None:
        if line.startswith(b'{"kind": "graph_break"'):
            self.progress.graph_breaks += 1
            return
        if not line.startswith(b'{"kind": "trace"'):
            return
        try:
            event = json.loads(line)
        except ValueError:
            return
        md = event.get("md") or {}
        if "dynamo_start" in md:
            stack = (md["dynamo_start"] or {}).get("stack") or []
            self.progress.frame = str(stack[-1].get("name")) if stack else "?"
            self.progress.compile_id = f"{md.get('frame_id')}/{md.get('frame_compile_id')}"
            self.progress.stage = "Dynamo"
            self.progress.compiles += 1
        elif "chromium_event" in md and event.get("payload"):
            try:
                phase = json.loads(event["payload"])
            except ValueError:
                return
            if phase.get("ph") == "B":
                self.progress.stage = STAGES.get(phase.get("name"), self.progress.stage)
        elif "compilation_metrics" in md:
            self.progress.stage = "running compiled code"
