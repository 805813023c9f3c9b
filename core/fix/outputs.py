"""Do two runs of a program return the same outputs? The compiled calls' outputs each run of
`tcx fix` kept (core/recorder/compat_fix.py), compared call by call within the dtype's tolerance.

Imports torch (lazily, inside `compare_outputs`): only `tcx fix` calls it, after the runs.
"""

from __future__ import annotations

import math
import os
from typing import Any


def compare_outputs(before_path: str, after_path: str) -> tuple[bool | None, str]:
    """(True, how many calls compared) when every kept call's outputs are close; (False, the first
    difference); (None, why) when the two runs could not be compared."""
    import torch

    if not (os.path.isfile(before_path) and os.path.isfile(after_path)):
        return None, "could not compare: a run kept no outputs (it ended before its calls finished)"
    try:
        before = torch.load(before_path, weights_only=True)
        after = torch.load(after_path, weights_only=True)
    except Exception as exc:  # a run that died while writing its file
        return None, f"could not compare: the outputs could not be read ({type(exc).__name__})"
    errors = [*before.get("errors", []), *after.get("errors", [])]
    if errors:
        return None, f"could not compare: a call's outputs could not be kept ({str(errors[0])[:200]})"
    a_calls, b_calls = before["calls"], after["calls"]
    if not a_calls:
        return None, "could not compare: no compiled call returned in the baseline"
    capped = bool(before.get("dropped") or after.get("dropped"))  # each run kept the calls that fit
    if len(a_calls) != len(b_calls) and not capped:
        return (
            False,
            f"{len(a_calls)} compiled calls returned in the baseline, {len(b_calls)} with the remedy",
        )
    shared = min(len(a_calls), len(b_calls))
    for index, (a, b) in enumerate(zip(a_calls[:shared], b_calls[:shared], strict=True)):
        differs = _call_difference(a, b, torch)
        if differs:
            return False, f"call #{index} ({a['function']}): {differs}"
    more = f" (the first {shared}: later outputs were too large to keep)" if capped else ""
    return (
        True,
        f"{shared} compiled calls compared{more} (same seed, same inputs): outputs equal within tolerance",
    )


def _call_difference(a: dict[str, Any], b: dict[str, Any], torch: Any) -> str | None:
    if a["function"] != b["function"]:
        return f"a call of {b['function']} where the baseline called {a['function']}"
    if len(a["tensors"]) != len(b["tensors"]):
        return f"{len(a['tensors'])} output tensors in the baseline, {len(b['tensors'])} with the remedy"
    for i, (x, y) in enumerate(zip(a["tensors"], b["tensors"], strict=True)):
        if x.shape != y.shape or x.dtype != y.dtype:
            return f"output {i} is {y.dtype}{list(y.shape)}, the baseline's {x.dtype}{list(x.shape)}"
        try:
            torch.testing.assert_close(y, x, equal_nan=True)
        except AssertionError as exc:
            first = str(exc).strip().splitlines()
            return f"output {i} differs ({' '.join(first[:3])[:300]})"
    if len(a["others"]) != len(b["others"]):
        return f"{len(a['others'])} other values returned in the baseline, {len(b['others'])} with the remedy"
    for i, (x, y) in enumerate(zip(a["others"], b["others"], strict=True)):
        if isinstance(x, float) and isinstance(y, float):
            if not math.isclose(x, y, rel_tol=1.3e-6, abs_tol=1e-5):
                return f"value {i} is {y!r}, the baseline's {x!r}"
        elif x != y:
            return f"value {i} is {str(y)[:80]}, the baseline's {str(x)[:80]}"
    return None
