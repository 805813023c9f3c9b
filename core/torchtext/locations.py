"""The user-code locations torch writes into its text: one parser per comment shape.

- guards (`get_verbose_code_part`): `GUARD  # SOURCE LINE  # FILE:LINE in FUNCTION` for a guard
  from user code (FILE shortened by `torch.utils._traceback.shorten_filename`, SOURCE LINE
  possibly empty), optionally followed by a hint: ` (HINT: ...)`, ` (_dynamo/...:N in f)`. A
  guard Dynamo added itself has one comment, `GUARD  # FILE:LINE in FUNCTION`, naming Dynamo's
  own frame: that is not a user location and is not returned;
- FX graph nodes (`torch.fx.graph._ParsedStackTrace`): `# File: FILE:LINE in FUNCTION, code: CODE`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# FUNCTION is a code name: `f`, `forward`, `<lambda>`, `<module>`, `<genexpr>`.
# `# file:line in fn`, tried at each `#` of a guard's comment in turn: linear in the comment (one
# pattern with the code before it, `#\s*(.*?)\s*#\s*…`, took 11 s on a comment of 2,000 blanks).
_GUARD_SITE = re.compile(r"#(?P<file>[^#]+?):(?P<line>\d+) in (?P<fn>[\w<>.]+)")
_FX_FILE = re.compile(r"#\s*File:\s*(?P<file>.+?):(?P<line>\d+) in (?P<fn>[^,]+), code: (?P<code>.*)$")


@dataclass(frozen=True)
class Location:
    file: str
    line: int
    function: str
    code: str = ""

    def to_json(self) -> dict[str, object]:
        return {"file": self.file, "line": self.line, "function": self.function, "code": self.code}


def guard_location(text: str) -> Location | None:
    """The user location at the end of a guard's text (`G['S'] == 2  # x * S  # prog.py:5 in f`)."""
    _, sep, comment = text.partition("  #")
    if not sep:
        return None
    newline = comment.find("\n")
    at = comment.find("#")
    while at >= 0 and not 0 <= newline < at:  # the code before the site is one line
        m = _GUARD_SITE.match(comment, at)
        if m:
            return Location(m["file"].strip(), int(m["line"]), m["fn"], comment[:at].strip())
        at = comment.find("#", at + 1)
    return None


def fx_node_location(line: str) -> Location | None:
    """`# File: /p/prog.py:5 in f, code: return x + 1` (a comment line of a printed FX graph)."""
    stripped = line.strip()
    if not stripped.startswith("#"):
        return None
    m = _FX_FILE.search(stripped)
    if not m:
        return None
    return Location(m["file"], int(m["line"]), m["fn"].strip(), m["code"].strip())
