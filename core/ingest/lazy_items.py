"""A list whose items are made when first read: what lets a view print as it builds.

A view over many compiles (`tcx guards --all` on a real job) would otherwise parse every
compile before printing the first: with its items made on first read, the renderer prints
compile 0 while compile 1 is not yet parsed, and the output is the same as the eager list's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar, overload

S = TypeVar("S")
T = TypeVar("T")


class LazyItems(Sequence[T], Generic[S, T]):
    """`[make(s) for s in sources]`, each item made once, when first read."""

    def __init__(self, sources: Sequence[S], make: Callable[[S], T]) -> None:
        self._sources: list[S] | None = list(sources)
        self._make: Callable[[S], T] | None = make
        self._made: dict[int, T] = {}
        self._len = len(self._sources)

    def __len__(self) -> int:
        return self._len

    @overload
    def __getitem__(self, index: int) -> T: ...
    @overload
    def __getitem__(self, index: slice) -> list[T]: ...
    def __getitem__(self, index: int | slice) -> T | list[T]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if not 0 <= index < len(self):
            raise IndexError(index)
        if index not in self._made:
            assert self._make is not None and self._sources is not None
            self._made[index] = self._make(self._sources[index])
            if len(self._made) == self._len:  # all made: let go of `make` and what it holds
                self._make = self._sources = None
        return self._made[index]

    def __iter__(self) -> Iterator[T]:
        return (self[i] for i in range(len(self)))

    def stream(self) -> Iterator[T]:
        """Every item in order, for one pass that keeps none: an item not made yet is made and
        not kept. A view printed compile by compile (`--all` on a 1 GB log) then holds one
        compile at a time, where iterating would keep every one it made."""
        for i in range(self._len):
            if i in self._made:
                yield self._made[i]
            else:
                assert self._make is not None and self._sources is not None
                yield self._make(self._sources[i])


def stream(items: Sequence[T]) -> Iterator[T]:
    """`items` for one pass: LazyItems.stream() when they are made on demand (a view's sections
    may also be a plain list, e.g. narrowed by the browser)."""
    return items.stream() if isinstance(items, LazyItems) else iter(items)
