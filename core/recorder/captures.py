"""Optional captures a view asks for, on top of the always-on ones (structured trace, breaks).

A view names what it needs (`RunOptions.capture`); the child installs only those, so
`tcx explain` stays as cheap as a plain run. Each installer takes the RecordingWriter and
returns None when installed or a one-line reason when this torch cannot provide it;
the reason is recorded in `run_start.features` and shown in the report header.

Installers live in the compatibility layer (core/recorder/compat*.py): this table only
maps names to them, importing lazily.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable

from tcx.core.ingest.recording import RecordingWriter

Installer = Callable[..., "str | None"]  # (writer) or (writer, argument)

# capture name -> "module:function" in the compatibility layer. A name may carry an argument
# after "=" ("cuda_preview=sm_90"); the installer is then called as installer(writer, argument).
CAPTURES: dict[str, str] = {
    "aot_graphs": "tcx.core.recorder.compat_inductor:install_aot_graphs",
    "fusion": "tcx.core.recorder.compat_inductor:install_fusion",
    "codegen": "tcx.core.recorder.compat_inductor:install_codegen",
    "cuda_preview": "tcx.core.recorder.compat_fakecuda:install_cuda_preview",
    "cudagraphs": "tcx.core.recorder.compat_cudagraphs:install",
    "device": "tcx.core.recorder.compat_fakecuda:install_default_device",
    "recompiles": "tcx.core.recorder.compat_recompiles:install",
    "instructions": "tcx.core.recorder.compat_dynamo:install_instruction_capture",
    "bytecode": "tcx.core.recorder.compat_dynamo:install_bytecode_capture",
    "guards": "tcx.core.recorder.compat_dynamo:install_guard_capture",
    "caches": "tcx.core.recorder.compat_cache:install",  # `tcx cache`: caches on, keys logged
    "export": "tcx.core.recorder.compat_export:install",  # `tcx export`; export=MODE: tcx exports :func
    "cost": "tcx.core.recorder.compat_cost:install",  # `tcx cost`: calls timed, steady ones profiled
    "fix": "tcx.core.recorder.compat_fix:install",  # `tcx fix`: fix=SPEC.json, a remedy applied, outputs kept
    # `tcx numerics`: numerics=SPEC.json, a run's values kept (eager: with float64 twins), a call localized
    "numerics": "tcx.core.recorder.compat_numerics:install",
}

# Callbacks a capture registers to run once the program has finished (e.g. walk the cache
# entries that are still alive); the child calls run_at_end() before writing program_exit.
_AT_END: list[Callable[[], None]] = []
# Callbacks that start a capture's per-run state again (counters, the code objects seen): an
# in-process recording (core/recorder/inprocess.py) installs each capture once per process and
# calls run_at_start() as each recording starts, so two recordings do not leak into each other.
_AT_START: list[Callable[[], None]] = []


def at_end(callback: Callable[[], None]) -> None:
    _AT_END.append(callback)


def at_start(callback: Callable[[], None]) -> None:
    _AT_START.append(callback)


def run_at_start() -> None:
    for callback in _AT_START:
        callback()


def run_at_end() -> None:
    for callback in _AT_END:
        # An end-of-run capture never turns a finished run into a failure: its view says what
        # is missing (it finds no events).
        with contextlib.suppress(Exception):
            callback()


def install_captures(names: list[str], writer: RecordingWriter) -> dict[str, str | None]:
    status: dict[str, str | None] = {}
    for name in dict.fromkeys(names):
        base, has_arg, argument = name.partition("=")
        target = CAPTURES.get(base)
        if target is None:
            status[name] = f"unknown capture {name!r} (this tcx does not provide it)"
            continue
        module, _, func = target.partition(":")
        installer: Installer = getattr(importlib.import_module(module), func)
        try:
            status[name] = installer(writer, argument) if has_arg else installer(writer)
        except Exception as exc:  # a capture that cannot install degrades its view only
            status[name] = f"{name} could not be installed: {type(exc).__name__}: {exc}"
    return status
