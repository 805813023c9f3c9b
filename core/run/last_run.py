"""Record once, view many: every live run keeps its recording in `.tcx/last.tcx` (unless
`--no-save`), so `tcx show`, another view and the drill-down commands an index prints re-render
it instead of running the program again.

The folder is made in the current directory with a `.gitignore` of its own (`*`), so it is never
committed; a directory tcx cannot write to only costs the saved copy (a note says so).

Runs in one folder do not clobber each other. The recording is copied next to `last.tcx` and
renamed over it (a reader never sees half a recording, nor two runs mixed). A run that overlaps
another (one still running when it started or when it ends, or one that finished while it ran:
`last.tcx` changed under it) also keeps its recording under a name of its own,
`.tcx/last-<time>-<pid>.tcx`, and names that file in its notes and drill-down commands, so each
run's follow-ups open its own recording; `last.tcx` is the run that finished last. Each run holds
an advisory lock on a marker file (`.tcx/running-<pid>-<n>`) while it runs; a marker whose lock
is free belongs to a run that died and is removed. At most KEEP_OWN named recordings are kept.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from pathlib import Path
from types import TracebackType

from tcx.core import files

FOLDER = ".tcx"
LAST_RUN = os.path.join(FOLDER, "last.tcx")
MARKER = "running-"
KEEP_OWN = 20  # recordings of overlapping runs kept under their own names, newest first
STALE_S = 24 * 3600  # a marker without a lock (no fcntl) older than this is a dead run's

try:
    import fcntl
except ImportError:  # not on Windows: markers without locks, aged out
    fcntl = None  # type: ignore[assignment]


class LastRun:
    """`with LastRun() as slot: ...run...; slot.keep(recording)`: where this run keeps its recording."""

    def __init__(self) -> None:
        self.folder = Path(FOLDER)
        self.marker: Path | None = None
        self.fd: int | None = None
        self.others_at_start = False
        self.last_at_start: tuple[int, int] | None = None
        self.why_not: str | None = None

    def __enter__(self) -> LastRun:
        try:
            self._make_folder()
            self.last_at_start = _identity(Path(LAST_RUN))
            self.others_at_start = bool(_live_markers(self.folder))
            self.marker, self.fd = _hold_marker(self.folder)
        except OSError as exc:
            self.why_not = f"{LAST_RUN} could not be written ({exc.strerror or exc})"
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self.fd is not None:
            os.close(self.fd)  # the lock goes with it
            self.fd = None
        if self.marker is not None:
            self.marker.unlink(missing_ok=True)
            self.marker = None

    def overlapped(self) -> bool:
        """Another run in this folder ran while this one did."""
        if self.others_at_start or _identity(Path(LAST_RUN)) != self.last_at_start:
            return True
        return bool(_live_markers(self.folder, mine=self.marker))

    def keep(self, recording: Path) -> tuple[str | None, str | None]:
        """Copy the run's recording to `.tcx/last.tcx` (and, when it overlapped another run, to a
        name of its own): (the path its follow-ups should name, None), or (None, why not)."""
        if self.why_not:
            return None, self.why_not
        try:
            own = None
            if self.overlapped():
                own = os.path.join(FOLDER, f"last-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.tcx")
                _replace_with_copy(recording, own)
                _prune(self.folder)
            _replace_with_copy(recording, LAST_RUN)
        except OSError as exc:
            return None, f"{LAST_RUN} could not be written ({exc.strerror or exc})"
        return own or LAST_RUN, None

    def _make_folder(self) -> None:
        self.folder.mkdir(exist_ok=True)
        ignore = self.folder / ".gitignore"
        if not ignore.exists():
            files.write_text(ignore, "# tcx's saved runs (tcx show .tcx/last.tcx); never committed\n*\n")


def _replace_with_copy(recording: Path, dest: str) -> None:
    """Copy to a new file in the folder, then rename it over `dest` (a link at `dest` is replaced,
    never followed)."""
    from tcx.core.ingest.recording import save_copy

    fd, partial = tempfile.mkstemp(prefix="last.", suffix=".partial", dir=FOLDER)
    os.close(fd)
    try:
        save_copy(recording, partial)
        os.replace(partial, dest)
    except OSError:
        Path(partial).unlink(missing_ok=True)
        raise


def _identity(path: Path) -> tuple[int, int] | None:
    """(inode, mtime) of a file, None when there is none: a replaced `last.tcx` has a new inode."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns


def _hold_marker(folder: Path) -> tuple[Path, int]:
    """A new marker file of this run, locked while the run lasts. It is locked under another name
    first, then renamed: another run never sees it unlocked (and takes it for a dead run's)."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    for n in range(1000):
        starting = folder / f".starting-{os.getpid()}-{n}"
        try:
            fd = os.open(starting, flags, 0o600)
        except FileExistsError:
            continue
        try:
            if fcntl is not None:
                fcntl.flock(fd, fcntl.LOCK_EX)
            path = folder / f"{MARKER}{os.getpid()}-{n}"
            os.replace(starting, path)
        except OSError:
            os.close(fd)
            starting.unlink(missing_ok=True)
            raise
        return path, fd
    raise OSError("no free marker name")


def _live_markers(folder: Path, mine: Path | None = None) -> list[Path]:
    """Markers of runs still running in `folder` (a dead run's marker is removed)."""
    live = []
    for path in folder.glob(f"{MARKER}*"):
        if path == mine or path.is_symlink() or not path.is_file():
            continue
        if _running(path):
            live.append(path)
        else:
            path.unlink(missing_ok=True)
    return live


def _running(path: Path) -> bool:
    if fcntl is None:
        with contextlib.suppress(OSError):
            return time.time() - path.stat().st_mtime < STALE_S
        return False
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        return True  # its run holds the lock
    finally:
        os.close(fd)
    return False


def _prune(folder: Path) -> None:
    """Keep the newest KEEP_OWN recordings of overlapping runs."""
    dated = []
    for path in folder.glob("last-*.tcx"):
        with contextlib.suppress(OSError):  # another run may prune it first
            dated.append((os.lstat(path).st_mtime, path))
    for _, path in sorted(dated, reverse=True)[KEEP_OWN:]:
        path.unlink(missing_ok=True)
