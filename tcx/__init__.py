"""tcx: make torch.compile explain itself.

From Python (tcx/api.py): `with tcx.record() as run:` records a block in-process, `tcx.load(path)`
opens a recording or a TORCH_TRACE log, and `run.explain()`, `run.guards()`, … build the views.
Importing tcx stays cheap: these are imported on first use, torch only when a block is recorded.
"""

from __future__ import annotations

__version__ = "0.1.0"

# name -> "module:attribute", imported on first use (PEP 562)
_LAZY = {
    "record": "tcx.api:record",
    "load": "tcx.api:load",
    "Run": "tcx.api:Run",
    "ViewResult": "tcx.api:ViewResult",
    "TcxError": "tcx.core.errors:TcxError",
    "UsageError": "tcx.core.errors:UsageError",
    "InputError": "tcx.core.errors:InputError",
}
__all__ = ["__version__", *_LAZY]


def __getattr__(name: str) -> object:
    target = _LAZY.get(name)
    if target is None:
        raise AttributeError(f"module 'tcx' has no attribute {name!r}")
    import importlib

    module, _, attr = target.partition(":")
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
