"""`tcx cache`: which compile-cache lookups hit, missed or were bypassed, why, and what it cost.

Everything comes from torch's own records of the runs: the `fx_graph_cache_*` and
`aotautograd_cache_*` artifacts (the state, torch's detailed status, the key and its parts,
the bypass reason, the time saved or taken) and the compile timers (core/analysis/compile_phases.py).
A warm run's miss is explained against the earlier run that stored the entry (or found it):
the key parts whose digests differ, by kind — a config key (old → new), the graph (a diff of
its code tied to the user lines that produced it), input metadata, versions, a custom pass —
or, for the same key, the symbolic-shape guards that failed. Nothing here is inferred that
torch did not log; where it did not log something, the view says so.

Pure and torch-free. One run (a recording, a log, `tcx report`) shows that run's lookups;
several runs (`tcx cache PROGRAM`: cold then warm; `tcx cache A B`) compare them in order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from tcx.core.analysis.compile_phases import CompileTime, compile_times
from tcx.core.analysis.restarts import restarts_by_attempt
from tcx.core.model import RunModel
from tcx.core.model.cache_lookups import CacheLookup
from tcx.core.selection import Selection, whole_run
from tcx.core.torchtext.cache_key import (
    Component,
    config_key,
    differing,
    field_changes,
    graph_diff,
    node_name,
)
from tcx.core.torchtext.fx_graph import parse_graph_nodes
from tcx.core.torchtext.json_object import json_object
from tcx.core.views.envelope import SOURCE_KINDS, envelope

SCHEMA = "tcx.cache/1"
CACHE_NAMES = {"fx_graph": "FX graph", "aotautograd": "AOTAutograd"}
# Graph texts a run logs per compile, searched for the user line of a graph's node (in order).
_GRAPH_EVENTS = {
    "aotautograd": ("dynamo_output_graph", "aot_inference_graph", "aot_forward_graph", "aot_backward_graph"),
    "fx_graph": ("aot_inference_graph", "aot_forward_graph", "aot_backward_graph", "dynamo_output_graph"),
}
# compilation_metrics fields holding a whole config as JSON: named when a key part is not text.
_METRIC_CONFIGS = {"inductor_config": "Inductor config", "functorch_config": "functorch config"}
NO_AOT_PARTS = (
    "torch logs the AOTAutograd key's parts only while its logger is at DEBUG (TORCH_LOGS=+aot; "
    "`tcx cache` turns it on)"
)
TOP_SINKS = 5


@dataclass
class Change:
    """One part of the key that differs from the run that stored the entry."""

    kind: str  # config | graph | inputs | versions | custom pass | setting | guards
    name: str
    old: str | None = None
    new: str | None = None
    diff: list[dict[str, Any]] = field(default_factory=list)  # graph: {"line", "user"} per -/+ line

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "old": self.old, "new": self.new, "diff": self.diff}


@dataclass
class Why:
    """Why a lookup did what it did, against an earlier run (`against`: its index)."""

    summary: str
    against: int | None = None
    changes: list[Change] = field(default_factory=list)


@dataclass
class Lookup(CacheLookup):
    """One lookup of the model's (core/model/cache_lookups.py), placed among the run's lookups and
    explained against the other runs'."""

    # (compile id, cache, graph, n): the same lookup in another run; n is "attempt N" for a lookup
    # of an abandoned attempt
    slot: tuple[Any, ...] = ()
    why: Why | None = None
    restarted: str | None = None  # torch restarted this attempt (why): its lookups are not counted

    @property
    def hit(self) -> bool:
        return self.state == "hit"

    @property
    def counted(self) -> bool:
        """A lookup of the attempt that produced the compile (an abandoned attempt's is not)."""
        return self.restarted is None

    def to_json(self, labels: list[str]) -> dict[str, Any]:
        why = self.why
        return {
            "cache": self.cache,
            "graph": self.graph,
            "state": self.state,
            "detail": self.detail,
            "key": self.key,
            "bypass_reason": self.reason,
            "guard_expr": self.guard_expr,
            "time_saved_s": self.time_saved_s,
            "time_taken_s": self.time_taken_s,
            "key_parts_logged": bool(self.components),
            "not_stored": self.not_stored,
            "attempt": self.attempt,
            "restarted": self.restarted,
            "why": None
            if why is None
            else {
                "summary": why.summary,
                "against": labels[why.against] if why.against is not None else None,
                "changes": [c.to_json() for c in why.changes],
            },
        }


@dataclass
class RunCaches:
    """One run's lookups and compile times, for the compiles its selection chose."""

    label: str
    model: RunModel
    selection: Selection
    env: dict[str, str]
    lookups: list[Lookup]
    times: dict[str, CompileTime]
    caches_disabled: bool | None  # True: force_disable_caches was set (tcx's usual recording)

    def of(self, compile_id: str | None) -> list[Lookup]:
        return [lk for lk in self.lookups if lk.compile_id == compile_id]

    def count(self, *states: str) -> int:
        """Lookups in these states, of the attempts that produced compiles (see Lookup.counted)."""
        return sum(1 for lk in self.lookups if lk.state in states and lk.counted)

    @property
    def counted(self) -> list[Lookup]:
        return [lk for lk in self.lookups if lk.counted]

    @property
    def compile_seconds(self) -> float | None:
        values = [t.seconds for cid, t in self.times.items() if t.seconds is not None]
        return round(sum(values), 3) if values else None

    @property
    def torch_saved_seconds(self) -> float:
        """What torch says the hits saved: an AOTAutograd hit's time covers its graphs' FX hits."""
        total = 0.0
        for cid in {lk.compile_id for lk in self.counted}:
            mine = [lk for lk in self.of(cid) if lk.counted and lk.hit]
            aot = [lk.time_saved_s or 0.0 for lk in mine if lk.cache == "aotautograd"]
            fx = [lk.time_saved_s or 0.0 for lk in mine if lk.cache == "fx_graph"]
            total += sum(aot) if aot else sum(fx)
        return round(total, 3)

    def remote(self) -> dict[str, dict[str, int]]:
        """Remote-cache hits and misses torch counted (compilation_metrics), when there were any."""
        out: dict[str, dict[str, int]] = {}
        for metrics in self.model.cache_metrics:
            if not self.selection.includes(metrics.compile_id):
                continue
            for (cache, state), value in metrics.remote.items():
                slot = out.setdefault(cache, {"hit": 0, "miss": 0})
                slot[state] += value
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "target": self.model.target,
            "source_kind": SOURCE_KINDS.get(self.model.source_kind, self.model.source_kind),
            "env": self.env,
            "caches": "disabled"
            if self.caches_disabled
            else ("on" if self.caches_disabled is False else None),
            "compile_seconds": self.compile_seconds,
            "lookups": {s: self.count(s) for s in ("hit", "miss", "bypass")},
            "torch_saved_seconds": self.torch_saved_seconds,
            "remote": self.remote(),
        }


@dataclass
class CacheView:
    runs: list[RunCaches]  # in order: cold (or A) first; the last is the run judged

    @property
    def model(self) -> RunModel:
        return self.runs[-1].model

    @property
    def selection(self) -> Selection:
        return self.runs[-1].selection

    @property
    def judged(self) -> RunCaches:
        return self.runs[-1]

    @property
    def labels(self) -> list[str]:
        return [r.label for r in self.runs]

    @property
    def cache_lookup_count(self) -> int:
        return len(self.judged.counted)

    @property
    def abandoned_lookup_count(self) -> int:
        """The judged run's lookups made by attempts torch restarted (not counted)."""
        return len(self.judged.lookups) - len(self.judged.counted)

    @property
    def cache_hit_count(self) -> int:
        return self.judged.count("hit")

    @property
    def cache_miss_count(self) -> int:
        """The judged run's lookups that did not hit: misses and bypasses (--max-cache-misses)."""
        return self.judged.count("miss", "bypass")

    @property
    def cache_bypass_count(self) -> int:
        return self.judged.count("bypass")

    @property
    def compile_seconds(self) -> float | None:
        return self.judged.compile_seconds

    @property
    def saved_seconds(self) -> float | None:
        """Measured: the first run's compile time minus the judged run's."""
        first, last = self.runs[0].compile_seconds, self.judged.compile_seconds
        if len(self.runs) < 2 or first is None or last is None:
            return None
        return round(first - last, 3)

    def compile_ids(self) -> list[str]:
        """Every compile id any run's selection chose, in first-seen order."""
        out: list[str] = []
        for run in self.runs:
            for cid in run.selection.compile_ids:
                if cid not in out:
                    out.append(cid)
            for cid in run.times:
                if run.selection.includes(cid) and cid not in out:
                    out.append(cid)
        return out

    def frame(self, compile_id: str) -> dict[str, Any]:
        """The compiled frame: its function and where it is (from the latest run that has it)."""
        for run in reversed(self.runs):
            comp = run.model.compiles.get(compile_id)
            if comp is not None:
                return {"function": comp.display_name, "file": comp.co_filename, "line": comp.co_firstlineno}
        return {"function": None, "file": None, "line": None}

    def fully_warm(self) -> list[dict[str, Any]]:
        """Per compile: what it would cost with every lookup a hit. Measured where some run hit all of
        its lookups; else the judged run's time less its graphs' Inductor compiles that missed.
        `kind` says which: measured, estimated, no lookups, caches disabled."""
        out: list[dict[str, Any]] = []
        for cid in self.compile_ids():
            if self.judged.caches_disabled:
                out.append(
                    {
                        "compile_id": cid,
                        "seconds": None,
                        "kind": "caches disabled",
                        "basis": "the caches were disabled in this run",
                    }
                )
                continue
            judged = self.judged.times.get(cid)
            seconds = judged.seconds if judged else None
            kind, basis = "no lookups", "no cache lookups"
            for run in reversed(self.runs):
                lookups = [lk for lk in run.of(cid) if lk.counted]
                time = run.times.get(cid)
                if lookups and all(lk.hit for lk in lookups) and time and time.seconds is not None:
                    seconds, kind = time.seconds, "measured"
                    basis = f"measured: every lookup hit in {run.label}"
                    break
            else:
                if (
                    any(lk.counted for lk in self.judged.of(cid))
                    and seconds is not None
                    and judged is not None
                ):
                    skipped = sum(
                        g["seconds"]
                        for g in judged.graph_compiles
                        if g.get("cache_state") in ("miss", "bypass")
                    )
                    seconds, kind = max(0.0, seconds - skipped), "estimated"
                    basis = (
                        f"estimated: {self.judged.label}'s time less its {skipped:.2f} s of Inductor "
                        "compiles that did not hit; a hit still loads the entry"
                    )
            out.append(
                {
                    "compile_id": cid,
                    "seconds": None if seconds is None else round(seconds, 3),
                    "kind": kind,
                    "basis": basis,
                }
            )
        return out

    def fully_warm_sentence(self) -> str | None:
        """What the fully-warm figure is made of, compile by compile as the data says (one sentence)."""
        rows = [r for r in self.fully_warm() if r["seconds"] is not None]
        if not rows or self.judged.caches_disabled:
            return None
        total = round(sum(r["seconds"] for r in rows), 3)
        parts = []
        for kind, what in (
            ("measured", "measured where every lookup of a compile hit"),
            ("estimated", f"estimated where {self.judged.label} missed or bypassed"),
            ("no lookups", "as measured where a compile made no cache lookup"),
        ):
            group = [r for r in rows if r["kind"] == kind]
            if group:
                seconds = sum(r["seconds"] for r in group)
                parts.append(f"{what}: {_count(len(group), 'compile')}, {seconds:.2f} s")
        misses = self.cache_miss_count
        tail = (
            f"; {self.judged.label} missed or bypassed {misses} of {self.cache_lookup_count} lookups"
            if misses
            else ""
        )
        return f"A fully warm start would cost ≈ {total:.2f} s of compile ({'; '.join(parts)}{tail})."

    @property
    def fully_warm_seconds(self) -> float | None:
        values = [f["seconds"] for f in self.fully_warm() if f["seconds"] is not None]
        return round(sum(values), 3) if values else None

    def time_sinks(self, top: int = TOP_SINKS) -> list[dict[str, Any]]:
        """The judged run's largest (compile, phase) times, with the user function compiled."""
        rows = []
        for cid, t in self.judged.times.items():
            if not self.judged.selection.includes(cid):
                continue
            for phase, seconds in t.phases.items():
                rows.append(
                    {"compile_id": cid, "phase": phase, "seconds": round(seconds, 3), **self.frame(cid)}
                )
        rows.sort(key=lambda r: -r["seconds"])
        return rows[:top]


def build_cache(
    model: RunModel,
    selection: Selection | None = None,
    *,
    earlier: tuple[tuple[RunModel, Selection], ...] = (),
    labels: tuple[str, ...] = (),
    envs: tuple[dict[str, str], ...] = (),
) -> CacheView:
    """The view of `model` (the judged run) after the `earlier` runs, oldest first."""
    pairs = [*earlier, (model, selection or whole_run(model))]
    names = list(labels) or _default_labels(len(pairs))
    runs = [_run(names[i], m, s, envs[i] if i < len(envs) else {}) for i, (m, s) in enumerate(pairs)]
    for k, run in enumerate(runs):
        for lookup in run.lookups:
            lookup.why = _why(lookup, k, runs)
    return CacheView(runs)


def _default_labels(n: int) -> list[str]:
    if n == 1:
        return ["this run"]
    return ["cold", "warm"] if n == 2 else ["cold"] + [f"warm {i}" for i in range(1, n)]


def _run(label: str, model: RunModel, selection: Selection, env: dict[str, str]) -> RunCaches:
    times = {cid: t for cid, t in compile_times(model).items() if selection.includes(cid)}
    return RunCaches(label, model, selection, env, _lookups(model, selection), times, _caches_disabled(model))


def _lookups(model: RunModel, selection: Selection) -> list[Lookup]:
    """Every cache lookup torch logged for the selected compiles, in log order. A lookup made by an
    attempt that torch restarted carries the restart's reason (it is shown, not counted)."""
    lookups: list[Lookup] = []
    seen: dict[tuple[Any, ...], int] = {}
    restarted = restarts_by_attempt(model)
    for logged in model.cache_lookups:
        if not selection.includes(logged.compile_id):
            continue
        lookup = Lookup(**vars(logged))
        restart = restarted.get((lookup.compile_id or "", lookup.attempt))
        base: tuple[Any, ...] = (lookup.compile_id, lookup.cache, lookup.graph)
        if restart is not None:
            lookup.restarted = restart.reason
            base = (*base, lookup.attempt)
        seen[base] = seen.get(base, -1) + 1
        lookup.slot = (*base[:3], f"attempt {lookup.attempt}" if restart else seen[base])
        lookups.append(lookup)
    return lookups


def _caches_disabled(model: RunModel) -> bool | None:
    """From torch's own compiler config in compilation_metrics; None when no metrics say."""
    answer = None
    for metrics in model.cache_metrics:
        if metrics.caches_disabled is not None:
            answer = metrics.caches_disabled or bool(answer)
    return answer


# --- why -----------------------------------------------------------------------------------------


def _why(lookup: Lookup, k: int, runs: list[RunCaches]) -> Why | None:
    if lookup.restarted is not None:
        return Why(
            f"not counted: torch restarted this compile and threw attempt {lookup.attempt} away with its "
            f"lookups ({lookup.restarted})"
        )
    if lookup.state == "bypass":
        return Why(f"bypassed: {lookup.reason or 'torch gave no reason'}")
    if lookup.state not in ("hit", "miss"):
        return Why(f"cache {lookup.state}")
    if lookup.hit:
        for j in range(k - 1, -1, -1):
            if any(
                o.slot == lookup.slot and o.state == "miss" and o.key == lookup.key for o in runs[j].lookups
            ):
                return Why(f"stored by {runs[j].label}", j)
        return None
    earlier = _earlier(lookup, k, runs)
    if earlier is None:
        bypassed = [runs[j].label for j in range(k) for lk in runs[j].lookups if lk.slot == lookup.slot]
        if len(runs) == 1:
            return Why(f"no entry for this key in the cache ({lookup.detail or 'miss'})")
        if k == 0:
            return Why("nothing stored yet: the first run")
        if bypassed:
            return Why(f"{', '.join(dict.fromkeys(bypassed))} bypassed this cache: nothing was stored")
        return Why("no earlier run compiled this graph")
    j, old = earlier
    label = runs[j].label
    if old.key == lookup.key:
        if lookup.detail == "guard_miss":
            change = Change("guards", "symbolic-shape guards", new=lookup.guard_expr)
            return Why(f"same key as {label}, but the stored entry's shape guards failed", j, [change])
        if old.not_stored:
            return Why(f"same key as {label}, which did not store it: {old.not_stored}", j)
        return Why(f"same key as {label}, but no entry was found (not stored, or removed from the cache)", j)
    if not (old.components and lookup.components):
        changes = _metrics_config_changes(runs[j].model, runs[k].model, lookup.compile_id)
        note = NO_AOT_PARTS if lookup.cache == "aotautograd" else "torch did not log this key's parts"
        head = f"the key differs from {label}'s; {note}"
        if changes:
            head += "; the compile's config differs:"
        elif lookup.cache == "aotautograd":
            head += "; the FX graph lookups of this compile list their keys' parts"
        return Why(head, j, changes)
    changes = [
        _change(a, b, old, lookup, runs[j], runs[k]) for a, b in differing(old.components, lookup.components)
    ]
    return Why(f"the key differs from {label}'s in {_count(len(changes), 'part')}", j, changes)


def _earlier(lookup: Lookup, k: int, runs: list[RunCaches]) -> tuple[int, Lookup] | None:
    """The latest earlier run whose same lookup stored an entry (a miss) or found one (a hit)."""
    for j in range(k - 1, -1, -1):
        for other in runs[j].lookups:
            if other.slot == lookup.slot and other.state in ("hit", "miss"):
                return j, other
    return None


def _count(n: int, what: str) -> str:
    return f"{n} {what}" + ("" if n == 1 else "s")


def _change(
    a: Component | None, b: Component | None, old: Lookup, new: Lookup, old_run: RunCaches, new_run: RunCaches
) -> Change:
    part = b or a
    assert part is not None
    name, kind = part.name, part.kind
    old_text, new_text = (a.value if a else None), (b.value if b else None)
    if kind == "graph" and old_text is not None and new_text is not None:
        lines = graph_diff(old_text, new_text)
        users = {
            "-": _node_lines(old_run.model, old.compile_id, old.cache),
            "+": _node_lines(new_run.model, new.compile_id, new.cache),
        }
        diff = [{"line": line, "user": users[line[0]].get(node_name(line) or "")} for line in lines]
        return Change("graph", "graph", diff=diff)
    if kind == "inputs" and old_text is not None and new_text is not None:
        fields = field_changes(old_text, new_text)
        diff = [{"line": f"{f}: {a} → {b}", "user": None} for f, a, b in fields]
        return Change("inputs", name, old_text, new_text, diff)
    key = config_key(name)
    if key is not None:
        config = "Inductor config" if name.startswith("inductor_config") else name.split("[", 1)[0]
        return Change("config", f"{config} {key}", old_text, new_text)
    if kind in ("config", "versions") and (old_text is None or new_text is None):
        # Raw bytes in the key (a pickled config, the torch version hash): name what torch's own
        # compilation_metrics say changed, when they do.
        named = _metrics_config_changes(old_run.model, new_run.model, new.compile_id)
        versions = _metrics_versions(old_run.model, new_run.model, new.compile_id)
        found = named if kind == "config" else versions
        if found:
            return Change(
                kind, name, diff=[{"line": f"{c.name}: {c.old} → {c.new}", "user": None} for c in found]
            )
    return Change(kind, name, old_text, new_text)


def _node_lines(model: RunModel, compile_id: str | None, cache: str) -> dict[str, dict[str, Any]]:
    """Node name -> the user line it came from, from this compile's graph texts in this run."""
    out: dict[str, dict[str, Any]] = {}
    graphs = model.graphs.every.get(compile_id, [])
    for event in _GRAPH_EVENTS[cache]:
        for name, graph in graphs:
            if name == event:
                for node in parse_graph_nodes(graph.text):
                    if node.user_line and node.name not in out:
                        out[node.name] = node.user_line
    return out


def _metrics(model: RunModel, compile_id: str | None) -> dict[str, Any]:
    comp = model.compiles.get(compile_id or "")
    return comp.metrics if comp else {}


def _metrics_config_changes(old: RunModel, new: RunModel, compile_id: str | None) -> list[Change]:
    """Config keys that differ between two runs' compilation_metrics of the same compile id."""
    a, b = _metrics(old, compile_id), _metrics(new, compile_id)
    out = []
    for field_name, label in _METRIC_CONFIGS.items():
        ca, cb = json_object(_text(a.get(field_name))), json_object(_text(b.get(field_name)))
        if not ca or not cb:
            continue
        for key in sorted(set(ca) | set(cb)):
            if ca.get(key) != cb.get(key):
                out.append(Change("config", f"{label} {key}", _repr(ca.get(key)), _repr(cb.get(key))))
    return out


def _metrics_versions(old: RunModel, new: RunModel, compile_id: str | None) -> list[Change]:
    a, b = _metrics(old, compile_id), _metrics(new, compile_id)
    return [
        Change("versions", field_name, _repr(a.get(field_name)), _repr(b.get(field_name)))
        for field_name in ("pytorch_version", "triton_version", "python_version")
        if a.get(field_name) != b.get(field_name)
    ]


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _repr(value: Any) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


# --- JSON ------------------------------------------------------------------------------------------


def to_json(view: CacheView) -> dict[str, Any]:
    labels = view.labels
    compiles = []
    for cid in view.compile_ids():
        per_run = []
        for run in view.runs:
            time = run.times.get(cid)
            per_run.append(
                {
                    "run": run.label,
                    "seconds": time.seconds if time else None,
                    "phases": time.to_json()["phases"] if time else {},
                    "lookups": [lk.to_json(labels) for lk in run.of(cid)],
                }
            )
        compiles.append({"compile_id": cid, **view.frame(cid), "runs": per_run})
    return {
        **envelope(SCHEMA, view.model, view.selection),
        "runs": [r.to_json() for r in view.runs],
        "judged_run": view.judged.label,
        "cache_lookup_count": view.cache_lookup_count,
        "cache_hit_count": view.cache_hit_count,
        "cache_miss_count": view.cache_miss_count,
        "cache_bypass_count": view.cache_bypass_count,
        "compile_seconds": view.compile_seconds,
        "saved_seconds": view.saved_seconds,
        "fully_warm_seconds": view.fully_warm_seconds,
        "fully_warm": view.fully_warm(),
        "fully_warm_summary": view.fully_warm_sentence(),
        "abandoned_lookup_count": view.abandoned_lookup_count,
        "time_sinks": view.time_sinks(),
        "compiles": compiles,
    }


def cache_counts(model: RunModel, selection: Selection | None = None) -> dict[str, dict[str, int]]:
    """Lookups per cache and state in one run (`tcx diff` and baselines compare them)."""
    out: dict[str, dict[str, int]] = {}
    for lk in _lookups(model, selection or whole_run(model)):
        if not lk.counted:
            continue
        states = out.setdefault(lk.cache, {})
        states[lk.state] = states.get(lk.state, 0) + 1
    return out
