"""Sizes that torch's guards tie together: what a remedy marking one size dynamic must mark with it,
and how the mark names each size in the user's code.

Pure and torch-free: it reads guard texts, as core/model/guard_sets.py keeps them.
"""

from __future__ import annotations

import re

from tcx.core.frames import frame_origin
from tcx.core.model.shape_facts import Dim
from tcx.core.torchtext import guards as guard_text

_SIZE_SIDE = re.compile(r"(?P<src>\S+)\.size\(\)\[(?P<dim>\d+)\]")  # one side of a tie: `L['y'].size()[0]`


# an argument passed through the compiled frame's **kwargs (a decorator's wrapper around forward): the user's
# call passes it by keyword, and the fix capture marks the call's keyword argument
KEYWORD_ARG = re.compile(r"kwargs\['(\w+)'\]")


_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def library_keyword(arg: str, file: str | None) -> bool:
    """`arg` reaches a library's frame through its wrapper's **kwargs (HF's decorated forward): the
    library's code may specialize its size, so a strict mark can raise where dynamic=True would not."""
    return bool(KEYWORD_ARG.fullmatch(arg)) and frame_origin(file or "") == "library"


def mark_target(arg: str, user_names: dict[str, str] | None = None) -> str:
    """What a mark names for `arg` in the user's code: their own name where their call passes one
    (`user_names`: `ids`, `batch.ids`; an expression such as `torch.ones_like(ids)` makes a new tensor each
    call, so it is not one to mark), the tensor passed by keyword for `kwargs['k']`, else the argument."""
    named = (user_names or {}).get(arg)
    if named and _DOTTED.fullmatch(named):
        return named
    m = KEYWORD_ARG.fullmatch(arg)
    return f"<the tensor you pass as {m[1]}=>" if m else arg


def tied_sizes(dim: Dim, guards: list[str]) -> list[Dim]:
    """The argument sizes that guards of the form `L['y'].size()[0] == L['x'].size()[0]` tie to `dim`,
    followed from one tie to the next. Marking `dim` dynamic alone while a tied size stays static
    makes torch raise ConstraintViolationError, so a remedy marks them together."""
    pairs = []
    for guard in guards:
        sides = [_SIZE_SIDE.fullmatch(side.strip()) for side in guard.split(" == ")]
        if len(sides) == 2 and sides[0] and sides[1]:
            a, b = (Dim(guard_text.source_name(m["src"]), int(m["dim"])) for m in sides if m)
            pairs.append((a, b))
    tied, todo = [dim], [dim]
    while todo:
        d = todo.pop()
        for a, b in pairs:
            other = b if a == d else a if b == d else None
            if other is not None and other not in tied:
                tied.append(other)
                todo.append(other)
    # an argument the caller can mark: a parameter, or a keyword passed through the frame's **kwargs
    return [d for d in tied[1:] if d.arg.isidentifier() or KEYWORD_ARG.fullmatch(d.arg)]
