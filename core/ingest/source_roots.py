"""Where an offline view may read a source file from disk: inside the program's recorded folders.

A recording or a log is input from anywhere, and it names files by path. A view of one quotes
source lines from the text recorded with the run; it reads a file from disk only inside a root:
the folders the recording says the program ran from (its working directory, its script's
folder), where the file must also have the sha256 recorded for it, or a folder the user gives
with `--source-root DIR`. A root that is the whole filesystem, or a path under /proc, /dev or
/sys, is no root. Pure and torch-free.
"""

from __future__ import annotations

import functools
import os
from typing import Any

# Files here are not source files, whatever a recording says (devices, process memory, kernel state).
PSEUDO_FILESYSTEMS = ("/proc", "/dev", "/sys")


def recorded_roots(header: dict[str, Any]) -> tuple[str, ...]:
    """The program's folders as a recording's header gives them: its working directory and the
    folder of the script it ran (`target`, without a `:function`)."""
    roots = []
    cwd = header.get("cwd")
    if isinstance(cwd, str):
        roots.append(cwd)
    target = header.get("target")
    if isinstance(target, str):
        script = target.rsplit(":", 1)[0] if target.count(":") == 1 else target
        if script.endswith(".py"):
            roots.append(os.path.dirname(script))
    return tuple(root for root in dict.fromkeys(roots) if usable_root(root))


def usable_root(root: str) -> bool:
    """An absolute folder that is not the filesystem's root nor in a pseudo filesystem."""
    if not root or not os.path.isabs(root):
        return False
    real = os.path.realpath(root)
    return real != os.path.dirname(real) and not in_pseudo_filesystem(real)


def in_pseudo_filesystem(real: str) -> bool:
    return any(real == top or real.startswith(top + os.sep) for top in PSEUDO_FILESYSTEMS)


@functools.lru_cache(maxsize=4096)  # a view asks about the same few files for every instruction
def inside(file: str, roots: tuple[str, ...]) -> str | None:
    """`file`'s real path (links resolved) when it lies inside one of the usable `roots`, else None.
    A relative path (torch keeps the one the program was started with) is taken from each root."""
    if not file or "\0" in file:
        return None
    for root in roots:
        if not usable_root(root):
            continue
        top = os.path.realpath(root)
        real = os.path.realpath(os.path.join(top, file))  # an absolute `file` stays itself
        if real.startswith(top.rstrip(os.sep) + os.sep) and not in_pseudo_filesystem(real):
            return real
    return None
