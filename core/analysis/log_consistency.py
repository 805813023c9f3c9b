"""What torch logged twice, checked against itself: a log with records taken out does not pass `check`.

Every line of an edited log can be well-formed; what gives the edit away is a fact torch writes
in two places. `disagreements(model)` compares them, per rank, in log order:

- graph-break records against `compilation_metrics.num_graph_breaks`: Inductor fills that field
  with the process's running count of graph breaks (`counters["graph_break"]`, which grows when
  Dynamo logs a `dynamo_graph_break_reason` record), so a compile whose metrics count N breaks
  must come after at least N break records. Only more records than the count are normal (a
  break torch does not count, or counters reset by `torch._dynamo.reset()`).
- resume functions against break records: Dynamo creates `torch_dynamo_resume_in_<fn>_at_<line>`
  when `<fn>` graph-breaks, so its first compile must come after a break record of `<fn>` (a
  break in a compile of `<fn>` or of one of its resume functions, or with `<fn>` on the break's
  user stack). Older torch wrote no break records (tlparse's comp_metrics.log, April 2024, has
  resume functions and none): this is checked only when the input shows that its torch writes
  them, by its version (WRITES_BREAK_RECORDS) or by holding at least one.
- compiles that started against compiles that ended: each `dynamo_start` is followed by the
  compile's `compilation_metrics`, written when the compile ends, however it ends (a graph
  break, a failure, the recompile limit). A compile with a start and no end means the log stops
  in the middle of that compile: it was cut, or the process died while compiling (torch writes
  nothing more then). Either way what the rest of the run did is unknown.

Pure and torch-free. The check runs on models built from recordings and logs alike; a live run
is a recording too.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from tcx.core.model import Compile, GraphBreak, RunModel
from tcx.core.torchtext.names import parse_resume

# A torch this new or newer writes a break record for every graph break.
WRITES_BREAK_RECORDS = (2, 6)
_VERSION = re.compile(r"^(\d+)\.(\d+)")
# Disagreements named one by one; the rest are counted in one line.
MAX_LISTED = 10


def disagreements(model: RunModel) -> list[str]:
    """One sentence per disagreement (the first MAX_LISTED, then how many more); [] when the facts agree."""
    found = [*_count_and_resume_disagreements(model), *_unfinished_compiles(model)]
    if len(found) > MAX_LISTED:
        found = [*found[:MAX_LISTED], f"... and {len(found) - MAX_LISTED} more disagreements like these"]
    return found


def base_function(name: str | None) -> str | None:
    """`torch_dynamo_resume_in_f_at_12` -> `f` (through resume functions of resume functions)."""
    while name is not None:
        resumed = parse_resume(name)
        if resumed is None:
            return name
        name = resumed[0]
    return None


def writes_break_records(model: RunModel) -> bool:
    """The input's torch writes `dynamo_graph_break_reason` records: its version says so, or it has one."""
    m = _VERSION.match(model.torch_version or "")
    if m and (int(m[1]), int(m[2])) >= WRITES_BREAK_RECORDS:
        return True
    return any(m.kind == "break" for m in model.milestones)


def _count_and_resume_disagreements(model: RunModel) -> Iterator[str]:
    check_resumes = writes_break_records(model)
    breaks = iter(model.graph_breaks)  # one per break record, in log order
    break_count: dict[Any, int] = {}  # rank -> break records so far
    broke: dict[Any, set[str]] = {}  # rank -> base functions with a break record so far
    unknown_frame: dict[Any, bool] = {}  # rank -> a break record whose function is unknown came first
    resumed_seen: set[tuple[Any, str]] = set()
    for ev in model.milestones:
        rank = ev.rank
        if ev.kind == "break":
            break_count[rank] = break_count.get(rank, 0) + 1
            functions = _break_functions(next(breaks, None), model.compiles.get(ev.compile_id or ""))
            broke.setdefault(rank, set()).update(functions)
            unknown_frame[rank] = unknown_frame.get(rank, False) or not functions
        elif ev.kind == "start":
            comp = model.compiles.get(ev.compile_id or "")
            name = _frame_name(comp)
            base = base_function(name)
            if not check_resumes or comp is None or name is None or base == name:
                continue
            if (rank, name) in resumed_seen:
                continue
            resumed_seen.add((rank, name))
            if base not in broke.get(rank, set()) and not unknown_frame.get(rank, False):
                yield (
                    f"compile {comp.compile_id} compiles {name}, the code Dynamo makes when {base} "
                    f"graph-breaks, but no graph-break record of {base} comes before it: "
                    "break records are missing"
                )
        elif ev.kind == "end":
            comp = model.compiles.get(ev.compile_id or "")
            counted = (comp.metrics if comp is not None else {}).get("num_graph_breaks")
            logged = break_count.get(rank, 0)
            if type(counted) is int and counted > logged and comp is not None:
                yield (
                    f"compile {comp.compile_id}'s compilation_metrics count {counted} graph break(s) "
                    f"so far in the process (num_graph_breaks), but the log holds {logged} "
                    "graph-break record(s) before it: break records are missing"
                )


def _break_functions(brk: GraphBreak | None, comp: Compile | None) -> set[str]:
    """The base functions a break record belongs to: its compile's frame and its user stack."""
    names = {base_function(_frame_name(comp))}
    if brk is not None:
        names.add(base_function(brk.frame))
        names.update(base_function(fr.name) for fr in brk.user_stack)
    return {n for n in names if n}


def _frame_name(comp: Compile | None) -> str | None:
    if comp is None:
        return None
    return comp.co_name or (comp.stack[-1].name if comp.stack else None)


def _unfinished_compiles(model: RunModel) -> Iterator[str]:
    started = [m.compile_id for m in model.milestones if m.kind == "start" and m.compile_id]
    ended = {m.compile_id for m in model.milestones if m.kind == "end"}
    for cid in dict.fromkeys(started):
        if cid not in ended:
            comp = model.compiles.get(cid)
            name = f" ({_frame_name(comp)})" if _frame_name(comp) else ""
            yield (
                f"compile {cid}{name} started (dynamo_start) and has no compilation_metrics, which "
                "torch writes when a compile ends: the log stops in the middle of it (cut short, or "
                "the process died while compiling)"
            )
