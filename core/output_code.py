"""Facts read off Inductor's output code (the `inductor_output_code` payload): its kernels.

A generated kernel is bound at module level as `name = async_compile.<kind>(...)`
(triton, cpp_pybinding, cuda, ...); extern calls (`extern_kernels.mm`) are not kernels.
"""

from __future__ import annotations

import re

_KERNEL = re.compile(r"^(?P<name>[A-Za-z_]\w*) = async_compile\.(?P<kind>\w+)\(", re.M)


def kernel_names(output_code: str) -> list[tuple[str, str]]:
    """(name, kind) of every kernel Inductor generated in one output-code module."""
    return [(m.group("name"), m.group("kind")) for m in _KERNEL.finditer(output_code or "")]
