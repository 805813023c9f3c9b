"""Many ranks: each rank's summary and compile facts computed in a process pool.

A directory of per-rank TORCH_TRACE logs is read once, by the parent (the merged model every view
uses). The per-rank table and the first divergence need one model per rank, and building 64 of
them is the slow part: the ranks are split among worker processes forked after the read, so
each worker sees the loaded events without copying or re-reading them (payloads stay on disk:
a forked worker reads them through the descriptors it inherited). Each worker builds its ranks'
models and returns their RankSummary and facts per compile id; the parent compares the facts
(core/views/ranks.divergence_of). The result is core/views/ranks.multi_rank_report's, which serves when a
pool cannot help: few ranks, few cores, or no `fork` on this platform.
"""

from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from tcx.core.model import RunModel
from tcx.core.model.ranks import rank_models
from tcx.core.views.ranks import (
    Divergence,
    RankSummary,
    divergence_of,
    facts_by_compile,
    multi_rank_report,
    summarize,
)

POOL_MIN_RANKS = 8  # below this a pool's start-up costs more than it saves
POOL_MIN_CPUS = 4  # measured on 2 cores: forking two workers saved nothing over one pass in-process

Facts = dict[str, dict[str, Any]]
_SHARED: RunModel | None = None  # the merged model (and the input it keeps) the forked workers read


def rank_report(model: RunModel, workers: int | None = None) -> tuple[list[RankSummary], Divergence | None]:
    """Per-rank summaries and the first divergence; `workers` forces the pool size (tests)."""
    global _SHARED
    ranks = model.ranks
    if workers is None:
        cpus = os.cpu_count() or 1
        workers = min(cpus, len(ranks)) if len(ranks) >= POOL_MIN_RANKS and cpus >= POOL_MIN_CPUS else 1
    if workers < 2 or len(ranks) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return multi_rank_report(model)
    shares = [ranks[i::workers] for i in range(workers)]
    _SHARED = model
    try:
        with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
            results = list(pool.map(_rank_facts, shares))
    finally:
        _SHARED = None
    merged = {rank: value for result in results for rank, value in result.items()}
    summaries = [merged[r][0] for r in ranks]
    return summaries, divergence_of({r: merged[r][1] for r in ranks})


def _rank_facts(ranks: list[int]) -> dict[int, tuple[RankSummary, Facts]]:
    """In a forked worker: these ranks' summaries and facts, from the parent's recording."""
    assert _SHARED is not None, "rank_pool workers are forked from rank_report"
    models = rank_models(_SHARED, only=set(ranks))
    return {s.rank: (s, facts_by_compile(models[s.rank])) for s in summarize(models)}
