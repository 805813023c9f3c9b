"""torch.export's truth for the export tests, read independently of tcx: what a fixture program
printed about each of its export calls, the records torch wrote to a log directory (a tiny reader of
its own), and the rule by which tcx's reading of a log must agree with its live run of the same
program: on every fact the log holds, and naming each it lacks."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

from conftest import REPO

EXPORT_LOGS = REPO / "fixtures" / "torch-trace" / "export"
_RECORD = re.compile(r"^[VIWEF](\d{4} [\d:.]+) +\d+ [^\]]*\] (\{.*\})\s*$")
_CONTEXT = ("frame_id", "frame_compile_id", "attempt", "has_payload", "stack", "compiled_autograd_id", "rank")
_OUTCOME = re.compile(r"^(?P<label>.+?): (?:(?P<ok>ok)|failed with (?P<exc>\w+))$")


def program_outcomes(stdout: str) -> list[tuple[str, str]]:
    """(label, "ok" or the exception's class) of each export call, as the program printed them
    (`Gate: failed with GuardOnDataDependentSymNode`); a program that raised ends with
    `raised module.Type` (fixtures/torch-trace/export/make_logs.sh)."""
    out = []
    for line in stdout.splitlines():
        m = _OUTCOME.match(line)
        if m:
            out.append((m["label"], "ok" if m["ok"] else m["exc"]))
        elif line.startswith("raised "):
            out.append(("raised", line.split()[-1].rsplit(".", 1)[-1]))
    return out


def _text(file: Path) -> str:
    raw = file.read_bytes()
    return (gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw).decode("utf-8", "replace")


def log_records(directory: Path) -> list[tuple[str, dict, str]]:
    """(event name, metadata, payload) of every record in every log of `directory`, the logs in the
    order torch wrote them (their first record's time): draft_export writes a log of its own."""
    texts = [_text(f) for f in sorted(directory.iterdir()) if f.is_file()]
    texts.sort(key=lambda t: _RECORD.match(t.splitlines()[0]).group(1))
    records: list[tuple[str, dict, list[str]]] = []
    for text in texts:
        for line in text.splitlines():
            if line.startswith("\t"):
                records[-1][2].append(line[1:] + "\n")
                continue
            m = _RECORD.match(line)
            if m:
                md = json.loads(m.group(2))
                records.append((next(k for k in md if k not in _CONTEXT), md, []))
    return [(name, md, "".join(payload)) for name, md, payload in records]


def short(exc_type: str | None) -> str | None:
    return exc_type.rsplit(".", 1)[-1] if exc_type else None


def program_file(file: str | None) -> str | None:
    """A fixture program's path from `fixtures/programs/` on: the committed logs were written in
    another checkout than the one the tests run in."""
    return (
        "fixtures/programs/" + file.split("fixtures/programs/", 1)[1]
        if file and "fixtures/programs/" in file
        else file
    )


def _issue(issue: dict, line_only: bool) -> tuple:
    where = (program_file(issue["file"]), issue["line"])
    return where if line_only else (issue["kind"], issue["expr"], *where)


def assert_log_agrees(logged: dict, live: dict) -> None:
    """One export call as tcx read it from a log and as it saw it live: equal on every fact the log
    holds, and each fact it does not hold named in `log_lacks`."""
    lacks = " | ".join(logged["log_lacks"])
    where = f"{live['name']} ({live['api']}): log {logged}"
    assert logged["api"] == live["api"], where
    if logged["ok"] is None:
        assert "how the call ended" in lacks, where
        assert logged["failures"] == [], where
        return
    assert logged["ok"] == live["ok"], where
    if logged["exc_type"]:
        assert short(logged["exc_type"]) == short(live["exc_type"]), where
    elif live["exc_type"]:
        assert "the exception" in lacks, where
    # an issue whose cause the log does not hold (`export error`, with a caveat) is compared by its
    # line: the last line torch traced; none when the log holds no line at all (placed at the call)
    assert len(logged["failures"]) == len(live["failures"]), where
    for issue, mine in zip(live["failures"], logged["failures"], strict=True):
        assert issue["line"] is not None, where  # every live failure is at the user's line
        if mine["kind"] == "export error" and mine["caveat"]:
            assert "the exception" in lacks, where
            if "last one torch traced" in mine["caveat"]:
                assert _issue(mine, True) == _issue(issue, True), where
        else:
            assert _issue(mine, False) == _issue(issue, False), where
