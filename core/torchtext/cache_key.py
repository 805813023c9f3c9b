"""The parts of a compile-cache key, as torch logs them in its `*_cache_{hit,miss,bypass}` artifacts.

`FxGraphHashDetails.debug_lines` (the FX graph cache) and `AOTAutogradCacheDetails`'s (the
AOTAutograd cache) are one line per hashed part, `[DIGEST] NAME: VALUE`:

    [xdo3uy7l…] gm: GraphModule()\\n\\ndef forward(self, primals_1, primals_2): …
    [cx7y7j5k…] example_inputs[0]: TensorMetadata(dtype=torch.float32, shape=torch.Size([8, 16]), …)
    [esstihe2…] fx_kwargs[is_backward]: False
    [cev5uo2j…] inductor_config[size_asserts]: True
    [sjldm5hy…] torch_version: <bytes>
    [jw4zp6st…] autograd_config: <the pickled functorch config>

VALUE is `repr`-like text, or raw bytes (the torch version hash, pickled configs) that are no
text at all; DIGEST is the part's own hash, so two keys differ exactly in the parts whose
digests differ.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

_LINE = re.compile(r"^\[(?P<digest>[a-z0-9]+)\] (?P<name>[^:\n]+?): ?(?P<value>.*)$", re.DOTALL)
_BINARY = re.compile("[\x00-\x08\x0b-\x1f\x7f\ufffd]")
_NODE = re.compile(r"^\s*(?P<name>[A-Za-z_]\w*)\s*(?::[^=]*)?=(?!=)")

# What a part of the key is about, by its name (the first rule that matches wins).
KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("config", ("inductor_config", "inductor_config_comms", "autograd_config", "functorch_config")),
    ("graph", ("gm",)),
    ("inputs", ("example_inputs",)),
    ("versions", ("torch_version", "system_info", "triton_version", "cache_key_tag")),
    (
        "custom pass",
        (
            "pre_grad_custom_pass",
            "post_grad_custom_pre_pass",
            "post_grad_custom_post_pass",
            "joint_custom_pre_pass",
            "joint_custom_post_pass",
            "_pre_fusion_custom_pass",
            "_post_fusion_custom_pass",
            "_fuse_ddp_communication_passes",
            "custom_backend_passes",
            "_custom_partitioner_fn",
            "custom_estimator_solver_uuids",
            "user_defined_triton_source",
        ),
    ),
)


@dataclass(frozen=True)
class Component:
    """One part of a cache key."""

    name: str  # e.g. `inductor_config[size_asserts]`, `gm`, `example_inputs[0]`
    digest: str
    value: str | None  # None: raw bytes, not text (a hash, a pickled config)

    @property
    def kind(self) -> str:
        return kind_of(self.name)


def parse_components(lines: list[object]) -> dict[str, Component]:
    """NAME -> Component for torch's `components` list (lines that do not parse are skipped)."""
    out: dict[str, Component] = {}
    for line in lines:
        m = _LINE.match(line) if isinstance(line, str) else None
        if m:
            value = m["value"]
            name = m["name"].strip()
            out[name] = Component(name, m["digest"], None if _BINARY.search(value) else value)
    return out


def kind_of(name: str) -> str:
    base = name.split("[", 1)[0]
    for kind, names in KINDS:
        if base in names:
            return kind
    return "setting"


def config_key(name: str) -> str | None:
    """`inductor_config[size_asserts]` -> `size_asserts`; None for a part that is not a config key."""
    base, sep, rest = name.partition("[")
    if sep and base.endswith("_config") and rest.endswith("]"):
        return rest[:-1]
    return None


def differing(
    old: dict[str, Component], new: dict[str, Component]
) -> list[tuple[Component | None, Component | None]]:
    """The parts whose digests differ, or that only one key has, in the newer key's order."""
    names = list(new) + [n for n in old if n not in new]
    out = []
    for name in names:
        a, b = old.get(name), new.get(name)
        if a is None or b is None or a.digest != b.digest:
            out.append((a, b))
    return out


def graph_code(value: str) -> list[str]:
    """The code lines of a printed GraphModule (`gm`): the body, without blank lines and torch's
    trailing "To see more debug info" comment."""
    return [
        line.rstrip()
        for line in value.splitlines()
        if line.strip() and not line.strip().startswith("# To see more debug info")
    ]


def graph_diff(old: str, new: str) -> list[str]:
    """`-`/`+` lines between two printed graphs (no context, no headers)."""
    out = []
    for line in difflib.unified_diff(graph_code(old), graph_code(new), lineterm="", n=0):
        if line.startswith(("---", "+++", "@@")):
            continue
        out.append(line)
    return out


def node_name(code_line: str) -> str | None:
    """`    mul = torch.ops.aten.mul.Tensor(relu, 2.0);  relu = None` -> `mul`."""
    m = _NODE.match(code_line.lstrip("+- "))
    return m["name"] if m else None


def fields(value: str) -> dict[str, str] | None:
    """`TensorMetadata(dtype=torch.float32, shape=torch.Size([8, 16]), …)` -> {field: value};
    None for a value of another shape."""
    m = re.fullmatch(r"\s*\w+\((?P<body>.*)\)\s*", value, re.DOTALL)
    if not m:
        return None
    out: dict[str, str] = {}
    depth, start = 0, 0
    body = m["body"]
    for i, ch in enumerate(body + ","):
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            name, sep, field_value = body[start:i].strip().partition("=")
            if not sep:
                return None
            out[name.strip()] = field_value.strip()
            start = i + 1
    return out


def field_changes(old: str, new: str) -> list[tuple[str, str | None, str | None]]:
    """(field, old, new) for each field two `Name(k=v, …)` values disagree on; [] when either is
    of another shape."""
    a, b = fields(old), fields(new)
    if a is None or b is None:
        return []
    return [(k, a.get(k), b.get(k)) for k in [*b, *(k for k in a if k not in b)] if a.get(k) != b.get(k)]
