"""One model per rank of a multi-rank input, built again from the loaded input (the merged model
keeps it for this): the per-rank table, the first divergence and a stopped job's last events need
each rank's facts apart. One pass over the events, whatever the number of ranks."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from tcx.core.ingest.recording import Recording
from tcx.core.ingest.trace_events import event_rank
from tcx.core.ingest.trace_lazy import LogRecord
from tcx.core.model.build import build_model
from tcx.core.model.run import RunModel


def rank_models(model: RunModel, only: Collection[int] | None = None) -> dict[int, RunModel]:
    """Each rank's model (events that name no rank belong to every rank), `only` these ranks; none
    for input from fewer than two ranks or a model built without its input."""
    rec = model._recording
    if rec is None or len(model.ranks) < 2:
        return {}
    per_rank: dict[Any, list[dict[str, Any] | LogRecord]] = {
        r: [] for r in model.ranks if only is None or r in only
    }
    for e in rec.events:
        rank = event_rank(e)
        if rank is None:
            for events in per_rank.values():
                events.append(e)
        elif rank in per_rank:
            per_rank[rank].append(e)
    return {
        rank: build_model(Recording(header=rec.header, events=events, source=rec.source), "trace")
        for rank, events in per_rank.items()
    }
