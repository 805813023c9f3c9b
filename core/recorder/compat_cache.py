"""The `caches` capture (`tcx cache`): compile caches stay on, and torch logs every key's parts.

The recorder normally sets `force_disable_caches` so that every stage runs and is recorded; a
`tcx cache` run keeps the caches on instead (core/recorder/child.py skips that step when this
capture is asked for) and points them at a private directory (the parent sets
TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR). torch writes the FX graph cache key's components
(`FxGraphHashDetails.debug_lines`) into every `fx_graph_cache_*` artifact, but the AOTAutograd
cache key's only while its logger is enabled for DEBUG: this capture enables it, and drops those
DEBUG records so they are not recorded twice (they are in the artifact).
"""

from __future__ import annotations

import logging

import torch

from tcx.core.ingest.recording import RecordingWriter
from tcx.core.recorder.compat import unavailable

AOT_CACHE_LOGGER = "torch._functorch._aot_autograd.autograd_cache"


class _DropDebug(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno > logging.DEBUG


def install(writer: RecordingWriter) -> str | None:
    """None when the caches are on and their keys are logged; else what this run cannot show."""
    config = getattr(getattr(torch, "compiler", None), "config", None)
    if config is not None and getattr(config, "force_disable_caches", False):
        return (
            "compile caches are force-disabled in this environment "
            "(TORCHINDUCTOR_FORCE_DISABLE_CACHES or torch.compiler.config.force_disable_caches): "
            "every lookup is skipped"
        )
    try:
        from torch._functorch._aot_autograd import autograd_cache  # noqa: F401
    except ImportError as exc:
        return unavailable("the AOTAutograd cache key's components", exc)
    logger = logging.getLogger(AOT_CACHE_LOGGER)
    logger.setLevel(logging.DEBUG)
    logger.addFilter(_DropDebug())
    return None
