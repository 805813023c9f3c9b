"""The selectors every view takes on top of `TARGET:func` (core/selection.py): `--compile ID`
(repeatable; a range such as `3/0-3/4`), `--kernel NAME` and `--rank N` (repeatable).

Each narrows the run's Selection to fewer compile ids; a selector that matches nothing is a
usage error naming what there is. Pure and torch-free.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from tcx.core.errors import UsageError
from tcx.core.model import RunModel
from tcx.core.selection import Selection

_ID = re.compile(r"^(?:rank(?P<rank>\d+):)?(?P<local>!?[\d/]+)$")
_RANK = re.compile(r"^rank(\d+):")
SHOWN_IDS = 12  # compile ids an error message lists


@dataclass(frozen=True)
class Selectors:
    compiles: tuple[str, ...] = ()  # as given: "3/0", "3/0-3/4", "rank1:0/0"
    kernel: str | None = None
    ranks: tuple[int, ...] = ()

    @property
    def given(self) -> bool:
        return bool(self.compiles or self.kernel or self.ranks)


def narrow(model: RunModel, selection: Selection, selectors: Selectors) -> Selection:
    """`selection` cut down to the compile ids the selectors choose (unchanged when none is given)."""
    if not selectors.given:
        return selection
    ids = list(selection.compile_ids)
    if selectors.ranks:
        missing = [r for r in selectors.ranks if r not in model.ranks]
        if missing:
            raise UsageError(
                f"no rank {_join(map(str, missing))} in this input.",
                hint="Ranks: " + (_join(map(str, model.ranks)) or "none (a single-process run)") + ".",
            )
        ids = [cid for cid in ids if rank_of(cid, model) in selectors.ranks]
        _require(ids, f"rank {_join(map(str, selectors.ranks))}", model, selection)
    if selectors.compiles:
        chosen: set[str] = set()
        for spec in selectors.compiles:
            matched = [cid for cid in ids if matches(spec, cid)]
            _require(matched, f"compile {spec!r}", model, selection)
            chosen.update(matched)
        ids = [cid for cid in ids if cid in chosen]
    if selectors.kernel:
        with_kernel = compiles_with_kernel(model, selectors.kernel)
        ids = [cid for cid in ids if cid in with_kernel]
        _require(ids, f"kernel {selectors.kernel!r}", model, selection)
    names = {model.compiles[c].co_name for c in ids if c in model.compiles and model.compiles[c].co_name}
    return replace(
        selection,
        compile_ids=tuple(ids),
        whole_run=False,
        functions=frozenset(n for n in names if n),
        kernel=selectors.kernel or selection.kernel,
    )


def choose(model: RunModel, function: str | None, selectors: Selectors = Selectors()) -> Selection:
    """The compiles `TARGET:func` chooses (core/selection.py), narrowed by the selectors; every
    view is built on it (the CLI, the Python API and `tcx mcp`).

    A function that chose nothing is a usage error, unless the program failed first (then the
    failure is what to report)."""
    from tcx.core.selection import select

    chosen = select(model, function, strict=not model.status.program.failed)
    return narrow(model, chosen, selectors)


def rank_of(compile_id: str, model: RunModel) -> int | None:
    """The rank a compile id belongs to: its `rankN:` prefix, or the only rank a log names."""
    m = _RANK.match(compile_id)
    if m:
        return int(m.group(1))
    return model.ranks[0] if len(model.ranks) == 1 else None


def _key(local: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", local))


def matches(spec: str, compile_id: str) -> bool:
    """Does `spec` (an id, or a range `A-B` of ids of one kind) choose `compile_id`? A spec without
    `rankN:` matches that compile on every rank."""
    m = _ID.match(compile_id)
    if m is None:
        return spec == compile_id
    cid_rank, local = m.group("rank"), m.group("local")
    lo, sep, hi = spec.partition("-")
    lo_m = _ID.match(lo.strip())
    if lo_m is None:
        return spec == compile_id
    if lo_m.group("rank") is not None and lo_m.group("rank") != cid_rank:
        return False
    if not sep:
        return lo_m.group("local") == local
    hi_local = hi.strip()
    hi_m = _ID.match(hi_local)
    if hi_m is not None:
        hi_local = hi_m.group("local")
    if hi_local.isdigit() and "/" in lo_m.group("local"):  # 3/0-4: compiles 0 to 4 of frame 3
        hi_local = lo_m.group("local").rsplit("/", 1)[0] + "/" + hi_local
    if lo_m.group("local").startswith("!") != local.startswith("!"):
        return False
    k, a, b = _key(local), _key(lo_m.group("local")), _key(hi_local)
    return len(k) == len(a) == len(b) and a <= k <= b


def compiles_with_kernel(model: RunModel, name: str) -> set[str]:
    """Compile ids whose Inductor output code defines a kernel named `name` (or containing it)."""
    return model.generated_code.compiles_with_kernel(name)


def _require(found: Iterable[object], what: str, model: RunModel, selection: Selection) -> None:
    if found:
        return
    ids = list(selection.compile_ids)
    listed = _join(ids[:SHOWN_IDS]) + (f" … ({len(ids)} in all)" if len(ids) > SHOWN_IDS else "")
    raise UsageError(
        f"{what} matches no compile of this run"
        + (f" ({selection.function}'s compiles)" if selection.function else "")
        + ".",
        hint=f"Compile ids: {listed or 'none'}. Ranges work too: --compile 3/0-3/4.",
    )


def _join(items: Iterable[str]) -> str:
    return ", ".join(items)
