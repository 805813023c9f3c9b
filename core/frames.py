"""Classify source locations: the user's code, libraries, torch, or tcx's own recorder."""

from __future__ import annotations

import functools
import os
import re
import sysconfig

import tcx

_RECORDER_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "recorder")
# tcx's own code: core/ and the tcx package (one folder when installed, two in a source checkout)
_TCX_DIRS = tuple(
    os.path.join(os.path.dirname(os.path.abspath(path)), "") for path in (__file__, tcx.__file__ or "")
)
_STDLIB = {os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib")}


def is_recorder_frame(filename: str) -> bool:
    """tcx's own frames (and runpy's) that sit between the user's program and the interpreter."""
    return (
        filename.startswith(_RECORDER_DIR)
        or "/tcx/core/recorder/" in filename
        or os.path.basename(filename) == "runpy.py"
        or filename == "<frozen runpy>"
    )


def is_tcx_code(filename: str) -> bool:
    """A file of tcx's own (its recorder hooks, its views): never the user's code."""
    return not filename.startswith("<") and os.path.abspath(filename).startswith(_TCX_DIRS)


@functools.lru_cache(maxsize=4096)  # a run's stacks name the same few files many times over
def frame_origin(filename: str) -> str:
    """'user', 'torch', 'library' (site-packages) or 'stdlib' for a frame's file."""
    norm = filename.replace("\\", "/")
    if "/torch/" in norm and ("site-packages" in norm or "dist-packages" in norm or "/torch/_" in norm):
        return "torch"
    if "site-packages" in norm or "dist-packages" in norm:
        return "library"
    if norm.startswith("<frozen ") or re.search(r"/lib/python3\.\d+/", norm) or _in_stdlib(filename):
        return "stdlib"
    return "user"


def _in_stdlib(filename: str) -> bool:
    return any(filename.startswith(p + os.sep) for p in _STDLIB)


_STACK_LINE = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>\S+)\n\s*(?P<code>[^\n]*)')


def parse_stack_trace(text: str) -> list[dict]:
    """The frames of a Python-formatted stack trace (as in FX nodes' `stack_trace`), outermost first."""
    return [
        {"file": m["file"], "line": int(m["line"]), "function": m["fn"], "code": m["code"].strip()}
        for m in _STACK_LINE.finditer(text or "")
    ]


def innermost_user_frame(frames: list[dict]) -> dict | None:
    """The innermost frame of the user's own code (torch wrappers such as a device mode can sit
    below it); the innermost frame of all when the stack has no user frame."""
    mine = [f for f in frames if frame_origin(f["file"]) == "user"]
    return (mine or frames or [None])[-1]
