"""tcx: make torch.compile explain itself.

From Python (tcx/api.py): `with tcx.record() as run:` records a block in-process, `tcx.load(path)`
opens a recording or a TORCH_TRACE log, and `run.explain()`, `run.guards()`, … build the views.
Importing tcx stays cheap: these are imported on first use, torch only when a block is recorded.

May import (tests/test_structure.py holds it): nothing of tcx's at import time (every stage reads
its version); its modules (api.py, pytest_plugin.py, __main__.py) use the CLI, core and the
renderers, and nothing in core imports tcx.api.
"""

from __future__ import annotations

import os

__version__ = "0.1.0"


def _in_source_checkout() -> None:
    """In a source checkout, cli/, core/, renderers/ and tui/ sit beside this folder and install as
    its subpackages (pyproject.toml's package-dir). Python imports this folder as `tcx` whenever the
    checkout's root comes first on sys.path (`python -m tcx` or a bench script run from the root),
    even where tcx is installed elsewhere: the root then holds the subpackages too, as installed."""
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(here)
    if not os.path.isdir(os.path.join(here, "cli")) and all(
        os.path.isfile(os.path.join(root, *parts))
        for parts in (("pyproject.toml",), ("cli", "__init__.py"), ("core", "__init__.py"))
    ):
        __path__.append(root)


_in_source_checkout()

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
