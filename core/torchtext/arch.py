"""CUDA architecture names: `sm_90`, `sm90`, `90`, `sm_90a` (the `a` variants share the number)."""

from __future__ import annotations

import re

_ARCH = re.compile(r"(?:sm_?)?(?P<n>\d{2,3})a?")


def parse_arch(text: str) -> int | None:
    """`sm_90`, `sm90`, `90`, `sm_90a` -> 90 (any case, surrounding blanks ignored); None otherwise."""
    m = _ARCH.fullmatch(text.strip().lower())
    return int(m["n"]) if m else None


def arch_name(arch: int) -> str:
    """90 -> `sm_90`."""
    return f"sm_{arch}"
