"""A series of runs of one program for `tcx cache` and `tcx check`'s warm-start budgets: cold
first, then warm, in a private compile-cache directory; the labels, the environment of each
run and the name each saved run gets. Torch-free; the CLI runs what this plans."""

from __future__ import annotations

import contextlib
import re
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from tcx.core.errors import UsageError

_RECORDING_SUFFIX = re.compile(r"(\.tcx(?:rec)?(?:\.gz)?|\.gz)$")


def labels(warm_runs: int) -> tuple[str, ...]:
    """cold, warm (one warm run) or cold, warm 1, warm 2, ..."""
    if warm_runs == 1:
        return ("cold", "warm")
    return ("cold", *(f"warm {i}" for i in range(1, warm_runs + 1)))


def run_envs(warm_runs: int, warm_env: dict[str, str]) -> tuple[dict[str, str], ...]:
    """The environment each run adds: nothing for the cold run, `--env` for every warm one."""
    return ({}, *([warm_env] * warm_runs))


def parse_env(items: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            raise UsageError(f"--env {item!r}: give NAME=VALUE (e.g. --env TORCHINDUCTOR_MAX_AUTOTUNE=1).")
        out[name] = value
    return out


@contextlib.contextmanager
def private_cache_dir() -> Iterator[dict[str, str]]:
    """TORCHINDUCTOR_CACHE_DIR and TRITON_CACHE_DIR in a fresh temporary folder: the first run is
    cold whatever the user's caches hold (remote caches are whatever the environment configures)."""
    folder = tempfile.mkdtemp(prefix="tcx-cache-")
    try:
        yield {"TORCHINDUCTOR_CACHE_DIR": folder, "TRITON_CACHE_DIR": str(Path(folder, "triton"))}
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def saved_name(save: str | None, index: int, warm_runs: int) -> str | None:
    """--save FILE keeps the judged (last) run in FILE, the cold one as FILE.cold.tcx, the other
    warm ones as FILE.warmN.tcx (before the extension): `tcx cache run.cold.tcx run.tcx` re-reads."""
    if save is None or index == warm_runs:
        return save
    m = _RECORDING_SUFFIX.search(save)
    stem, ext = (save[: m.start()], m.group()) if m else (save, "")
    return f"{stem}.{'cold' if index == 0 else f'warm{index}'}{ext}"
