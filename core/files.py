"""Files tcx writes: made as a new file beside the destination, then renamed into place.

A destination that already exists as a symlink (a `FILE.tcx.patch` or a `--save` path someone
linked to ~/.bashrc) is replaced, never written through: the new file is created with
O_CREAT | O_EXCL | O_NOFOLLOW under a name of its own, and `os.replace` renames it over the
destination (a rename replaces a link, it does not follow it). A reader never sees half a file,
and a failed write leaves the old file as it was. Links in the folders above the destination are
the user's path, followed as any program follows them. Torch-free.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


@contextlib.contextmanager
def replacing(
    path: str | Path, mode: str = "w", *, option: str | None = None, **open_args: Any
) -> Iterator[IO[Any]]:
    """An open file (`mode` "w" or "wb", `open_args` as `open` takes them) that becomes `path`
    when the block ends without an error; on an error it is removed and `path` is left as it was.
    Made with the permissions a plain `open(path, "w")` would give (0o666 less the umask).

    With `option` (the option that named `path`, e.g. "-o"), a path that cannot be written (a
    missing folder, a name too long, a directory there) is that option's usage error (exit 2)."""
    if mode not in ("w", "wb"):
        raise ValueError(f"replacing() writes a new file: mode 'w' or 'wb', not {mode!r}")
    dest = Path(path)
    partial = dest.with_name(f".{dest.name[:80]}.{secrets.token_hex(6)}.partial")
    with _as_usage(option, path):
        _refuse_directory(dest)
        fd = os.open(partial, _FLAGS, 0o666)
    try:
        with os.fdopen(fd, mode, **open_args) as fh:
            yield fh
        with _as_usage(option, path):
            os.replace(partial, dest)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(partial)
        raise


def write_text(path: str | Path, text: str, *, option: str | None = None) -> None:
    with replacing(path, "w", option=option, encoding="utf-8", newline="") as fh:
        fh.write(text)


def write_bytes(path: str | Path, data: bytes, *, option: str | None = None) -> None:
    with replacing(path, "wb", option=option) as fh:
        fh.write(data)


def copy_file(src: str | Path, dest: str | Path) -> None:
    """`src`'s bytes as a new file at `dest`, with `src`'s modification time."""
    with open(src, "rb") as fin, replacing(dest, "wb") as fout:
        shutil.copyfileobj(fin, fout)
    info = os.stat(src)
    os.utime(dest, ns=(info.st_atime_ns, info.st_mtime_ns), follow_symlinks=False)


@contextlib.contextmanager
def _as_usage(option: str | None, path: str | Path) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        if option is None:
            raise
        from tcx.core.errors import UsageError

        raise UsageError(f"{option} {str(path)[:200]!r} cannot be written ({exc.strerror or exc}).") from None


def _refuse_directory(dest: Path) -> None:
    """A directory at the destination (not a link to one: a link is replaced) cannot be replaced."""
    try:
        st = os.lstat(dest)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(21, "Is a directory", str(dest))
