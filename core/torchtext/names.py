"""Names torch gives to the code it generates.

- a resume function (`torch._dynamo.resume_execution`): `torch_dynamo_resume_in_<fn>_at_<line>`,
  the rest of `<fn>` after a graph break at `<line>`; the transformed code calls it through a
  global named `__resume_at_<offset>_<n>` (`<offset>`: the bytecode offset it resumes at);
- a compiled graph, called by the transformed code through a global `__compiled_fn_<n>`;
- an Inductor kernel (`triton_poi_fused_add_relu_0`, `cpp_fused_mm_1`): see `output_code`.
"""

from __future__ import annotations

import re

RESUME_PREFIX = "torch_dynamo_resume_in_"
_RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<fn>.+)_at_(?P<line>\d+)$")
_RESUME_AT = re.compile(r"^__resume_at_(?P<offset>\d+)_\d+$")
_RESUME_GLOBAL = "__resume_at"
_COMPILED_FN = "__compiled_fn"


def resume_name(function: str, line: int) -> str:
    """The code name of `function`'s resume function after a break at `line`."""
    return f"{RESUME_PREFIX}{function}_at_{line}"


def is_resume(name: str | None) -> bool:
    return bool(name and name.startswith(RESUME_PREFIX))


def parse_resume(name: str | None) -> tuple[str, int] | None:
    """`torch_dynamo_resume_in_f_at_12` -> ("f", 12); None for any other name."""
    m = _RESUME.match(name or "")
    return (m["fn"], int(m["line"])) if m else None


def is_compiled_graph_global(name: str) -> bool:
    return name.startswith(_COMPILED_FN)


def is_generated_global(name: str) -> bool:
    """A global the transformed bytecode calls: a compiled graph or a resume function."""
    return name.startswith((_COMPILED_FN, _RESUME_GLOBAL))


def resume_global_offset(name: str) -> int | None:
    """`__resume_at_30_2` (the global the transformed code calls) -> 30, the offset it resumes at."""
    m = _RESUME_AT.match(name)
    return int(m["offset"]) if m else None


def display_name(name: str | None) -> str:
    """`torch_dynamo_resume_in_f_at_12` -> `f (resumed after line 12)`; other names unchanged."""
    if not name:
        return "?"
    resumed = parse_resume(name)
    return f"{resumed[0]} (resumed after line {resumed[1]})" if resumed else name
