"""Guard sources as the user wrote them: `L['self']._modules['transformer']._modules['h']._modules['0']
._parameters['weight']` reads `self.transformer.h.0.weight`. Display only: the JSON keeps torch's text."""

from __future__ import annotations

import re

_LOCAL = re.compile(r"\bL\[(['\"])([A-Za-z_]\w*)\1\]")
_IMPORT = re.compile(r"\bG\[(['\"])__import_(\w+?)\1\]")
# a module's children, parameters and buffers: torch's path through the dicts nn.Module keeps them in
_MEMBER = re.compile(r"\._(?:modules|parameters|buffers)\[(['\"])([^'\"\[\]]+)\1\]")


def dotted(text: str) -> str:
    """Module paths in `text` dotted: locals by name, imported modules by module name (torch writes
    `transformers.models.bert` as `G['__import_transformers_dot_models_dot_bert']`)."""
    if "[" not in text:
        return text
    text = _MEMBER.sub(lambda m: "." + m.group(2), text)
    text = _IMPORT.sub(lambda m: m.group(2).replace("_dot_", "."), text)
    return _LOCAL.sub(lambda m: m.group(2), text)
