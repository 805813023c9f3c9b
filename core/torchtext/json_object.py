"""A JSON object from a payload torch or the recorder wrote: {} for anything else (text is input)."""

from __future__ import annotations

import json
from typing import Any


def json_object(value: Any) -> dict[str, Any]:
    """`value` if it is a dict, the object a JSON text holds, else {} (not JSON, or not an object)."""
    if isinstance(value, dict):
        return value
    try:
        parsed = json.loads(value) if isinstance(value, str) and value else None
    except (ValueError, RecursionError):
        return {}
    return parsed if isinstance(parsed, dict) else {}
