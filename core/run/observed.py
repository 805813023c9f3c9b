"""What a live run could not observe: a gate never passes a program it did not see.

tcx's counts come from torch's structured trace. When Dynamo's own hooks saw a compile (a
graph break, a traced instruction) whose trace events never arrived, the recording is
incomplete and every count built from it would be too low: that is an error, never
"0 graph breaks". Compiles in the program's child processes are recorded by each child
(core/recorder/children.py) and summarized here into the run's recording; a child tcx could
not record is listed as not observed. Torch-free: also used on saved recordings.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tcx.core.errors import InputError
from tcx.core.ingest.recording import RecordingWriter, load_recording
from tcx.core.model import RunModel, build_model
from tcx.core.model.process import child_identity
from tcx.core.model.status import CHILD_COUNTS


def check_capture(model: RunModel, saved_to: str | None = None) -> None:
    """Raise InputError (exit 4) when the recording lost trace events of compiles that happened."""
    lost = list(model.status.lost_compiles)
    if not lost:
        return
    shown = ", ".join(lost[:8]) + (f" and {len(lost) - 8} more" if len(lost) > 8 else "")
    why = model.status.features.why("structured_trace") or (
        "the program probably replaced or silenced torch's structured trace (the `torch.__trace` "
        "logger, or `torch._logging.trace_structured` itself) in a way tcx could not undo"
    )
    kept = f" The recording was saved to {saved_to}." if saved_to else ""
    raise InputError(
        f"capture was lost: Dynamo compiled {len(lost)} frame(s) (compile ids {shown}) whose "
        f"structured-trace events never reached tcx, so its counts would be too low and no "
        f"report or check result is given. Cause: {why}.{kept}"
    )


# --- child processes ---------------------------------------------------------------------------
# Each child process the program started writes its own recording (core/recorder/children.py);
# the parent summarizes them into `child_process` events of the run's recording, so a saved
# recording reports them as the live run did.

MAX_CHILD_SITES = 200


def attach_children(recording: Path, directory: Path) -> None:
    """Append one `child_process` event per child that compiled (or could not be observed)."""
    if not directory.is_dir():
        return
    summaries = [s for s in map(_summarize_child, sorted(directory.glob("*.tcx"), key=_pid_order)) if s]
    for path in sorted(directory.glob("*.unobserved.json"), key=_pid_order):
        summaries.append(_unobserved(path))
    if not summaries:
        return
    writer = RecordingWriter(recording)
    for summary in summaries:
        writer.write("child_process", **summary)
    writer.close()


def _pid_order(path: Path) -> tuple[int, str]:
    head = path.name.split(".", 1)[0]
    return (int(head) if head.isdigit() else 0, path.name)


def _summarize_child(path: Path) -> dict[str, Any] | None:
    from tcx.core.selection import compiled_functions, select
    from tcx.core.views.explain import explain, site_brief

    try:
        rec = load_recording(path)
    except InputError:
        return None
    model = build_model(rec, "recording")
    child = model.child.to_json()
    lost = list(model.status.lost_compiles)
    if lost:
        return {**child, "observed": False, "reason": f"capture lost (compile ids {lost})"}
    if not model.compiles:
        return None  # it imported torch (a data-loader worker, say) but compiled nothing
    whole = explain(model)
    functions = {}
    for name in compiled_functions(model):  # so `script.py:func` counts a child's compiles of func
        of_name = explain(model, select(model, name, strict=False))
        functions[name] = {key: getattr(of_name, key) for key in CHILD_COUNTS}
        functions[name]["sites"] = [[s.gb_type, s.file, s.line] for s in of_name.sites[:MAX_CHILD_SITES]]
    return {
        **child,
        "observed": True,
        **{key: getattr(whole, key) for key in CHILD_COUNTS},
        "functions": functions,
        "graph_breaks": [site_brief(s) for s in whole.sites[:MAX_CHILD_SITES]],
        "problems": list(rec.problems[:5]),
    }


def _unobserved(path: Path) -> dict[str, Any]:
    try:
        info = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, ValueError):
        info = {}
    info = info if isinstance(info, dict) else {}
    return {
        **child_identity(info).to_json(),
        "observed": False,
        "reason": str(info.get("reason") or "unknown"),
    }
