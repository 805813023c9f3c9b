"""Get a RunModel for a TARGET: record a live run, or load a recording or a TORCH_TRACE log."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tcx.core.errors import UsageError
from tcx.core.frames import frame_origin
from tcx.core.ingest.recording import load_recording
from tcx.core.model import RunModel, build_model
from tcx.core.model.status import ProgramStatus
from tcx.core.run.inputs import model_of
from tcx.core.run.last_run import LastRun
from tcx.core.run.observed import attach_children, check_capture
from tcx.core.run.targets import FileTarget, ProgramTarget, resolve_target
from tcx.core.selectors import Selectors


@dataclass
class Loaded:
    model: RunModel
    function: str | None  # restrict views to this function's frames
    saved_to: str | None = None  # --save FILE
    kept: str | None = None  # .tcx/last.tcx (core/run/last_run.py), where it could be written
    not_kept: str | None = None  # why .tcx/last.tcx could not be written
    selectors: Selectors = field(default_factory=Selectors)  # --compile, --kernel, --rank


# Called with a live run's recording and its model before the recording is kept: may append events
# (tcx cost appends the timings of the program's other runs). The model is built again after it.
Extend = Callable[[Path, RunModel], None]


def load(target_text: str, opts: object | None = None, extend: Extend | None = None) -> Loaded:
    """Resolve TARGET and return its model; a program target is run under the recorder."""
    target = resolve_target(target_text)
    if isinstance(target, FileTarget):
        return Loaded(model_of(target), target.function)
    return _record(target, opts, extend)


def _record(target: ProgramTarget, opts: object | None, extend: Extend | None = None) -> Loaded:
    from tcx.core.run import driver

    opts = opts or driver.RunOptions()
    with LastRun() if getattr(opts, "keep_last", False) else nullcontext() as slot:
        return finish_live(target, record_live(target, opts), opts, slot, extend)


def record_live(target: ProgramTarget, opts: Any) -> Any:
    """Run the target under the recorder (a status line while it runs); the LiveRun, not yet loaded."""
    from tcx.core.run import driver

    with live_status(enabled=not getattr(opts, "show_output", False)) as progress:
        return driver.record(target, opts, progress)


def finish_live(
    target: ProgramTarget, run: Any, opts: Any, slot: LastRun | None, extend: Extend | None = None
) -> Loaded:
    """A finished live run's model: its child processes and the user's sources attached, saved where
    asked and in `slot` (the run's place in .tcx/, held while it ran), its folder removed. A command may
    append events to `run.path` before calling this, or in `extend`, given the run's first model."""
    from tcx.core.run import driver

    try:
        attach_children(run.path, run.workdir / "children")
        model = build_model(load_recording(run.path), "live")
        if extend is not None:
            extend(run.path, model)
        files = [f.file for b in model.graph_breaks for f in b.user_stack if frame_origin(f.file) == "user"]
        files += [target.script] if target.script else []
        driver.attach_sources(run.path, files)
        model = build_model(load_recording(run.path), "live")
        save = getattr(opts, "save", None)
        if save:
            driver.keep(run, save)
        kept, not_kept = slot.keep(run.path) if slot is not None else (None, None)
    finally:
        run.cleanup()
    check_exit(model)
    check_capture(model, save or kept)
    # When tcx called the function itself everything recorded belongs to it (the compiled
    # frame may be `forward` of a module): core/selection.select knows, from the calls recorded.
    function = target.function
    return Loaded(model, function, saved_to=save, kept=kept, not_kept=not_kept)


def check_exit(model: RunModel) -> None:
    """A run that could not start the program as asked is a usage error (a missing function, no torch);
    a recorder that failed is tcx's error."""
    program = model.status.program
    if program.exit_status == "usage":
        raise UsageError(str(program.message))
    if program.exit_status == "setup":
        raise UsageError(
            str(program.message),
            hint="tcx records with the torch installed next to it: pip install torch.",
        )
    if program.exit_status == "tcx_error":
        raise RecorderError(program)


@contextmanager
def live_status(enabled: bool) -> Iterator[Callable[[Any], None] | None]:
    """A status line on stderr while a long compile runs; nothing when stderr is not a terminal."""
    if not (enabled and sys.stderr.isatty()):
        yield None
        return
    from rich.console import Console

    with Console(stderr=True).status("starting the program", spinner="dots") as status:

        def update(progress: Any) -> None:
            status.update(progress.describe())

        yield update


class RecorderError(Exception):
    """The recorder itself failed (a tcx bug); carries the child's traceback. `where` names the
    line of tcx's code that failed while the program ran (core/recorder/program.tcx_fault)."""

    def __init__(self, program: ProgramStatus) -> None:
        message = " ".join(str(program.message or "").split("\n\n")[0].split())[:600]
        text = f"{program.exc_type}: {message}"
        if program.where:
            text = f"tcx's own code failed while the program ran ({program.where}) with {text}"
        super().__init__(text)
        self.traceback = program.traceback or ""
