"""Record once, view many: every live run keeps its recording in `.tcx/last.tcx` (unless
`--no-save`), so `tcx show`, another view and the drill-down commands an index prints re-render
it instead of running the program again.

The folder is made in the current directory with a `.gitignore` of its own (`*`), so it is never
committed; a directory tcx cannot write to only costs the saved copy (a note says so).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from tcx.core import files

FOLDER = ".tcx"
LAST_RUN = os.path.join(FOLDER, "last.tcx")


def keep_last(recording: Path) -> tuple[str | None, str | None]:
    """Copy a live run's recording to `.tcx/last.tcx`: (the path, None), or (None, why not)."""
    from tcx.core.ingest.recording import save_copy

    folder = Path(FOLDER)
    partial: str | None = None
    try:
        folder.mkdir(exist_ok=True)
        ignore = folder / ".gitignore"
        if not ignore.exists():
            files.write_text(ignore, "# tcx's saved runs (tcx show .tcx/last.tcx); never committed\n*\n")
        fd, partial = tempfile.mkstemp(prefix="last.", suffix=".partial", dir=folder)
        os.close(fd)
        save_copy(recording, partial)
        os.replace(partial, LAST_RUN)  # a reader never sees half a recording, nor two runs mixed
    except OSError as exc:
        if partial:
            Path(partial).unlink(missing_ok=True)
        return None, f"{LAST_RUN} could not be written ({exc.strerror or exc})"
    return LAST_RUN, None
