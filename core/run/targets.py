"""Resolve the TARGET argument: a script, a function in a script or module, a recording, a log.

Torch-free: this runs before anything decides whether torch is needed at all.
"""

from __future__ import annotations

import gzip
import re
from dataclasses import dataclass
from pathlib import Path

from tcx.core.errors import READ_ERRORS, UsageError

_DOTTED = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")
RECORDING_SUFFIXES = (".tcx", ".tcxrec", ".tcx.gz")
# Names with these endings are files (a missing one is "no such file", never a module name).
FILE_SUFFIXES = (*RECORDING_SUFFIXES, ".log", ".gz", ".json", ".txt", ".jsonl")
_HEADER = b'{"kind": "header", "format": "tcx-recording"'


@dataclass(frozen=True)
class ProgramTarget:
    """Something to run: a script path or an importable module, optionally one function in it."""

    script: str | None  # absolute path of a .py file
    module: str | None  # dotted module name
    function: str | None  # restrict the report to this function (and call it if never called)

    @property
    def label(self) -> str:
        base = self.script or self.module or "?"
        return f"{base}:{self.function}" if self.function else base


@dataclass(frozen=True)
class FileTarget:
    """A saved recording or a TORCH_TRACE log (file or directory): rendered without running.
    `run.tcx:func` selects one function's compiles, as `script.py:func` does for a live run."""

    path: str
    kind: str  # "recording" | "trace"
    function: str | None = None

    @property
    def label(self) -> str:
        return f"{self.path}:{self.function}" if self.function else self.path


Target = ProgramTarget | FileTarget


def _looks_like_recording(path: Path) -> bool:
    if path.name.endswith(RECORDING_SUFFIXES):
        return True
    try:
        with path.open("rb") as fh:
            head = fh.read(len(_HEADER))
        if head.startswith(b"\x1f\x8b"):  # gzip: a saved recording or a compressed TORCH_TRACE log
            with gzip.open(path, "rb") as fh:
                head = fh.read(len(_HEADER))
    except READ_ERRORS:
        return False
    return head.startswith(_HEADER)


def split_target(text: str) -> tuple[str, str | None]:
    """(the file or module part of TARGET, the function after ':' or None): `run.tcx:f`,
    `script.py:f`, `pkg.mod:f`; a file whose own name has a ':' (that exists) is not split.

    The one place TARGET is split: resolution here, and the MCP server's path policy, which must
    check exactly the file that resolution opens (cli/mcp_tools.py). Raises OSError for a path the
    OS refuses (resolve_target turns it into a UsageError)."""
    left, sep, right = text.rpartition(":")
    if sep and left and _DOTTED.match(right) and not Path(text).exists():
        return left, right
    return text, None


def resolve_target(text: str) -> Target:
    """Turn the TARGET argument into a `ProgramTarget` or `FileTarget`, or raise UsageError."""
    if not text:
        raise UsageError("TARGET is empty: give a script, script.py:function, module:function or a file.")
    if "\0" in text:
        raise UsageError(f"TARGET {shown(text)} holds a NUL byte: no file or module has such a name.")
    try:
        return _resolve(text)
    except OSError as exc:  # e.g. ENAMETOOLONG: a name longer than the OS allows
        raise UsageError(f"TARGET {shown(text)} cannot be used: {exc.strerror or exc}.") from None


def shown(text: str, limit: int = 120) -> str:
    """`repr(text)`, cut to `limit` characters (a 5,000-character path in an error is noise)."""
    return repr(text) if len(text) <= limit else repr(text[:limit]) + f"… ({len(text):,} characters)"


def _resolve(text: str) -> Target:
    left, function = split_target(text)
    if function is not None:
        if not left.endswith(".py") and Path(left).exists():  # a recording or log, one function of it
            file = _resolve(left)
            if isinstance(file, FileTarget):
                return FileTarget(path=file.path, kind=file.kind, function=function)
        if left.endswith(".py"):
            return ProgramTarget(script=_existing_script(left), module=None, function=function)
        if _DOTTED.match(left):
            return ProgramTarget(script=None, module=left, function=function)
        raise UsageError(
            f"cannot read TARGET {shown(text)}: the part before ':' must be a .py file or a dotted "
            "module name."
        )
    path = Path(text)
    if text.endswith(".py"):
        return ProgramTarget(script=_existing_script(text), module=None, function=None)
    if path.is_dir():
        return FileTarget(path=str(path.resolve()), kind="trace")
    if path.is_file():
        kind = "recording" if _looks_like_recording(path) else "trace"
        return FileTarget(path=str(path.resolve()), kind=kind)
    _refuse_special(path, text)
    if _DOTTED.match(text) and "." in text and not text.endswith(FILE_SUFFIXES):
        return ProgramTarget(script=None, module=text, function=None)
    raise UsageError(
        f"no such file: {shown(text)}.", hint="Give a .py script, module:function, a recording or a log."
    )


def _existing_script(text: str) -> str:
    path = Path(text)
    if not path.is_file():
        _refuse_special(path, text)
        raise UsageError(f"no such file: {shown(text)}.")
    return str(path.resolve())


def _refuse_special(path: Path, text: str) -> None:
    """A FIFO, socket or device exists but is no file to read: reading it could block forever."""
    if path.exists() and not path.is_file() and not path.is_dir():
        raise UsageError(
            f"{shown(text)} is not a regular file (a FIFO, socket or device): tcx reads programs, "
            "recordings and logs from regular files."
        )
