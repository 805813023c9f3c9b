"""`tcx diff A B`: what changed between two runs — breaks, recompiles, graphs, kernels, time.

A break is matched across runs by (type, file name, function, source text of the line),
so inserting lines above it does not turn it into "removed + added".
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tcx import __version__
from tcx.core.analysis.kernel_compare import compare_kernels
from tcx.core.budgets import COUNT_KEYS
from tcx.core.model.conditions import RunConditions
from tcx.core.views.run_facts import SIDE_KEYS, WORSE_WHEN_HIGHER, BreakFact, RunFacts

SCHEMA = "tcx.diff/1"


@dataclass
class Diff:
    a: RunFacts
    b: RunFacts
    counts: dict[str, tuple[int, int]]
    breaks_added: list[BreakFact]
    breaks_removed: list[BreakFact]
    breaks_changed: list[tuple[BreakFact, BreakFact]]  # occurrences differ
    kernels_added: list[str]
    kernels_removed: list[str]
    compile_time: dict[str, tuple[float | None, float | None]]
    # (cache, state) -> lookups in A and in B (core/views/cache.py; runs recorded with caches on)
    caches: dict[tuple[str, str], tuple[int, int]] = field(default_factory=dict)
    # kernel by kernel (core/analysis/kernel_compare.py): identical, differ, not_compared, only_in_a/b
    kernels_compared: dict[str, list[str]] = field(default_factory=dict)

    @property
    def conditions_differ(self) -> list[str]:
        """How the two runs compiled differently (backend, overrides, caches): said before any
        count, because a different backend alone changes graph, break and recompile counts."""
        a, b = self.a.conditions, self.b.conditions
        out = []
        unknown = not (a.backend and b.backend)  # a log does not say which backend it ran
        if a.as_program != b.as_program or (not unknown and a.backend != b.backend):
            out.append(f"backend: A {_backend(a)}, B {_backend(b)}")
        if a.caches and b.caches and a.caches != b.caches:
            out.append(f"compile caches: A {a.caches}, B {b.caches}")
        return out

    @property
    def programs_failed(self) -> list[str]:
        """Each side whose program did not finish: its counts are of the part that ran."""
        return [
            f"{name}: the program did not finish ({side.ended}"
            + (f": {side.failure})" if side.failure else ")")
            for name, side in (("A", self.a), ("B", self.b))
            if side.failed
        ]

    @property
    def regressions(self) -> list[str]:
        out = (
            [f"the program did not finish: {self.b.failure or self.b.ended}"]
            if self.b.failed and not self.a.failed
            else []
        )
        out += [
            f"{key}: {a} -> {b}" for key, (a, b) in self.counts.items() if key in WORSE_WHEN_HIGHER and b > a
        ]
        out += [f"new graph break: {s.text}" for s in self.breaks_added]
        return out

    def to_json(self) -> dict[str, Any]:
        """The envelope describes run B (the run being judged); `a` and `b` describe each side."""
        b = {k: self.b.side.get(k) for k in SIDE_KEYS}
        return {
            "schema": SCHEMA,
            "tcx_version": __version__,
            **b,
            "a": {k: self.a.side.get(k) for k in SIDE_KEYS},
            "b": b,
            "counts": {k: {"a": a, "b": b, "delta": b - a} for k, (a, b) in self.counts.items()},
            "graph_breaks_added": [s.to_json() for s in self.breaks_added],
            "graph_breaks_removed": [s.to_json() for s in self.breaks_removed],
            "graph_breaks_changed": [{"a": x.to_json(), "b": y.to_json()} for x, y in self.breaks_changed],
            "kernels_added": self.kernels_added,
            "kernels_removed": self.kernels_removed,
            "kernels_compared": self.kernels_compared,
            "compile_time_s": {k: {"a": a, "b": b} for k, (a, b) in self.compile_time.items()},
            "caches": {f"{c}.{s}": {"a": a, "b": b} for (c, s), (a, b) in self.caches.items()},
            "conditions_differ": self.conditions_differ,
            "programs_failed": self.programs_failed,
            "regressions": self.regressions,
        }


def to_json(d: Diff) -> dict[str, Any]:
    return d.to_json()


def match_sites(
    a: list[BreakFact], b: list[BreakFact]
) -> tuple[list[tuple[BreakFact, BreakFact]], list[BreakFact], list[BreakFact]]:
    """Pair the breaks of two runs: by (type, file name, function, line text), then ignoring the
    file name (a renamed script). Returns (pairs, only in a, only in b)."""
    pairs: list[tuple[BreakFact, BreakFact]] = []
    left, right = list(a), list(b)
    for with_file in (True, False):
        index: dict[tuple[Any, ...], list[BreakFact]] = {}
        for s in right:
            index.setdefault(s.key(with_file), []).append(s)
        unmatched = []
        for s in left:
            candidates = index.get(s.key(with_file))
            if candidates:
                other = candidates.pop(0)
                pairs.append((s, other))
                right.remove(other)
            else:
                unmatched.append(s)
        left = unmatched
    return pairs, left, right


def diff(a: RunFacts, b: RunFacts) -> Diff:
    pairs, removed, added = match_sites(a.graph_breaks, b.graph_breaks)
    changed = [(x, y) for x, y in pairs if x.occurrences != y.occurrences]
    a_kernels = Counter(_kernel_key(k.name) for k in a.kernels)
    b_kernels = Counter(_kernel_key(k.name) for k in b.kernels)
    phases = sorted(set(a.compile_time_s) | set(b.compile_time_s))
    return Diff(
        a=a,
        b=b,
        counts={k: (a.counts.get(k, 0), b.counts.get(k, 0)) for k in COUNT_KEYS},
        breaks_added=added,
        breaks_removed=removed,
        breaks_changed=changed,
        kernels_added=sorted((b_kernels - a_kernels).elements()),
        kernels_removed=sorted((a_kernels - b_kernels).elements()),
        compile_time={p: (a.compile_time_s.get(p), b.compile_time_s.get(p)) for p in phases},
        caches=_caches(a.caches, b.caches),
        kernels_compared=compare_kernels(a.kernels, b.kernels),
    )


def _backend(side: RunConditions) -> str:
    name = side.backend or "as the program asks (not recorded which)"
    if side.as_program:
        return f"{name} (as the program asks)" if side.backend else name
    asked = ", ".join(side.program_asked) or "?"
    return f"{name} (an override: the program asks for {asked})"


def _caches(
    a: dict[str, dict[str, int]], b: dict[str, dict[str, int]]
) -> dict[tuple[str, str], tuple[int, int]]:
    """Lookups per (cache, state) on each side; older facts without them count none."""
    keys = {(c, s) for side in (a, b) for c, states in side.items() for s in states}
    return {(c, s): (a.get(c, {}).get(s, 0), b.get(c, {}).get(s, 0)) for c, s in sorted(keys)}


def _kernel_key(name: str) -> str:
    """Kernel names end in a per-graph index (`triton_poi_fused_relu_0`); compare without it."""
    head, _, tail = name.rpartition("_")
    return head if tail.isdigit() and head else name
