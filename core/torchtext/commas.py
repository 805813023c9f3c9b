"""Top-level commas: `a, f(b, c), 'd,e'` is three items (commas inside brackets or quotes stay)."""

from __future__ import annotations


def split_top_level(text: str) -> list[str]:
    """The comma-separated items of `text`, stripped, commas inside (), [], {} or quotes kept."""
    items, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            quote = "" if ch == quote and text[i - 1] != "\\" else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth <= 0:
            items.append(text[start:i].strip())
            start = i + 1
    return [*items, text[start:].strip()]
