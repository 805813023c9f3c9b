"""Where torch.export.draft_export writes its log, so a TORCH_TRACE directory that lacks it can say
where it went (torch-free).

draft_export takes torch's trace for itself while it runs (torch/export/_draft_export.py,
`CaptureStructuredTrace`): it removes the TORCH_TRACE handler, writes the call's events to a log
of its own — in the directory `TORCH_DTRACE` names, else in `<tempdir>/export_<user>` — and does
not put the TORCH_TRACE handler back, so nothing the program does afterwards reaches TORCH_TRACE.
A program whose first export is a draft_export leaves its TORCH_TRACE directory empty.
"""

from __future__ import annotations

import getpass
import os
import re
import tempfile
from pathlib import Path

DTRACE_ENV = "TORCH_DTRACE"


def draft_log_dir() -> Path | None:
    """The directory draft_export writes to on this machine, as torch computes it (None when the
    user name cannot be known)."""
    if root := os.environ.get(DTRACE_ENV):
        return Path(root)
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        return None
    return Path(tempfile.gettempdir()) / ("export_" + re.sub(r'[\\/:*?"<>|]', "_", user))


def draft_logs_note() -> str:
    """One sentence: where draft_export's logs are, with how many this machine holds there now."""
    folder = draft_log_dir()
    where = f"{DTRACE_ENV} names, else <tempdir>/export_<user>"
    if folder is None:
        return f"torch.export.draft_export writes its own log, in the directory {where}."
    try:
        logs = [p for p in folder.iterdir() if p.name.endswith(".log") and p.is_file()]
    except OSError:
        logs = []
    found = f" ({len(logs)} log(s) there now)" if logs else ""
    return (
        f"torch.export.draft_export writes its own log, in the directory {where}: here {folder}{found}; "
        "it also stops TORCH_TRACE, so nothing the program does after a draft_export is in a "
        "TORCH_TRACE log."
    )
