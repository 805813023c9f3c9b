"""Record torch.compile inside the current process (the pytest plugin's recorder).

The CLI records in a child process so a crash cannot take tcx down; a test suite already
runs the code under test in-process, so the plugin records there: the structured trace
and typed graph breaks go into a list instead of a file, and the same analyses run on it.
"""

from __future__ import annotations

import platform
from typing import Any

from tcx.core.recording import Recording

_ACTIVE: list[InProcessRecorder] = []
_HOOK_INSTALLED: list[str | None] = []


class ListWriter:
    """The RecordingWriter interface, into a list."""

    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events

    def write(self, kind: str, **fields: Any) -> None:
        self.events.append({"kind": kind, **fields})


class InProcessRecorder:
    """`with InProcessRecorder() as rec: ...` records every compile in the block."""

    def __init__(self, label: str = "in-process") -> None:
        self.label = label
        self.events: list[dict[str, Any]] = []
        self._handler: Any = None
        self._caches: bool | None = None

    def __enter__(self) -> InProcessRecorder:
        from tcx.core.recorder import compat
        from tcx.core.recorder.child import TraceHandler

        writer = ListWriter(self.events)
        features = {"graph_break_types": _install_break_dispatch()}
        compat.reset_dynamo()
        self._caches = compat.caches_disabled(True)
        self._handler = TraceHandler(writer)  # type: ignore[arg-type]
        features["structured_trace"] = compat.attach_trace_handler(self._handler)
        writer.write(
            "run_start",
            torch_version=compat.TORCH_VERSION,
            python_version=platform.python_version(),
            backend=None,
            backend_reason="the test's own torch.compile calls",
            features=features,
        )
        _ACTIVE.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        from tcx.core.recorder import compat

        _ACTIVE.remove(self)
        compat.detach_trace_handler(self._handler)
        if self._caches is not None:
            compat.caches_disabled(self._caches)
        compat.reset_dynamo()
        status = "ok" if exc[0] is None else "exception"
        self.events.append(
            {"kind": "program_exit", "status": status, "exc_type": getattr(exc[0], "__name__", None)}
        )

    def recording(self) -> Recording:
        header = {"format": "tcx-recording", "version": 1, "target": self.label}
        return Recording(header=header, events=list(self.events), source=self.label)


def _install_break_dispatch() -> str | None:
    """Dynamo's graph-break hook is installed once per process and feeds the active recorder."""
    if not _HOOK_INSTALLED:
        from tcx.core.recorder import compat

        def on_break(event: dict[str, Any]) -> None:
            if _ACTIVE:
                _ACTIVE[-1].events.append({"kind": "graph_break", **event})

        _HOOK_INSTALLED.append(compat.install_graph_break_hook(on_break))
    return _HOOK_INSTALLED[0]
