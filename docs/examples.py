"""Render the docs' example blocks by running tcx on the saved fixtures, so they never drift.

A page marks a block with the command that produces it:

    <!-- tcx-example: tcx export fixtures/torch-trace/export/shapes/trace -->
    ```console
    $ tcx export fixtures/torch-trace/export/shapes/trace
    (what tcx printed)
    ```
    <!-- /tcx-example -->

`head=N` after `tcx-example` keeps the first N lines of the output and ends the block with
`...`. Every command reads a recording or a TORCH_TRACE log under fixtures/ (offline: no
program runs). It runs as a user would run it, `python -m tcx ...`, in a fresh folder that
holds a copy of each fixture the command names, so the paths it prints are the same on every
machine (a path outside that folder, recorded where the fixture was made, prints whole, as
tcx prints a path two folders up or more), with
NO_COLOR set and 100 columns. A non-zero exit code is shown as `$ echo $?`.

    python docs/examples.py --write   # run every example again and rewrite the pages
    python docs/examples.py --check   # exit 1 naming each block that differs (tests/test_docs.py)
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = ("README.md", "docs/*.md")
WIDTH = 100
TIMEOUT_S = 120
BLOCK = re.compile(
    r"<!-- tcx-example(?P<opts>(?: \w+=\S+)*): (?P<cmd>tcx [^\n]*?) -->\n"
    r"(?P<body>.*?)<!-- /tcx-example -->\n",
    re.S,
)


@dataclass(frozen=True)
class Example:
    page: Path
    command: str  # `tcx ...` as the page shows it
    head: int | None  # keep this many lines of the output


def pages(root: Path = ROOT) -> list[Path]:
    return sorted(p for pattern in PAGES for p in root.glob(pattern))


def examples(text: str, page: Path) -> list[Example]:
    found = []
    for m in BLOCK.finditer(text):
        opts = dict(o.split("=", 1) for o in m["opts"].split())
        unknown = set(opts) - {"head"}
        if unknown:
            raise SystemExit(f"{page}: unknown option(s) {sorted(unknown)} in a tcx-example marker")
        found.append(Example(page, m["cmd"], int(opts["head"]) if "head" in opts else None))
    return found


def run(command: str, root: Path = ROOT) -> tuple[list[str], int]:
    """What `command` printed (stdout, then stderr) and its exit code."""
    args = shlex.split(command)[1:]
    with tempfile.TemporaryDirectory(prefix="tcx-docs-") as tmp:
        # Two levels below the temporary folder: a recorded path beside it (/tmp/tcx/...) is then
        # `../..` away and prints whole, as it does from any checkout.
        cwd = Path(tmp) / "checkout"
        cwd.mkdir()
        for arg in args:
            path = arg.split(":", 1)[0]
            if path.startswith("fixtures/"):
                source, copy = root / path, cwd / path
                if not source.exists():
                    raise SystemExit(f"{command!r} names {path}, which does not exist")
                copy.parent.mkdir(parents=True, exist_ok=True)
                (shutil.copytree if source.is_dir() else shutil.copy2)(source, copy)
        env = {**os.environ, "NO_COLOR": "1", "COLUMNS": str(WIDTH), "LINES": "50", "TERM": "dumb"}
        # where draft_export's logs go (tcx export names it, with how many are there): a folder of the
        # run's own, so the example does not depend on this machine's user or its temporary folder
        env["TORCH_DTRACE"] = "draft_export_logs"
        for name in ("FORCE_COLOR", "CLICOLOR_FORCE", "TCX_DEBUG", "PYTHONWARNINGS"):
            env.pop(name, None)
        proc = subprocess.run(
            [sys.executable, "-m", "tcx", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=TIMEOUT_S,
            check=False,
        )
    return (proc.stdout + proc.stderr).rstrip("\n").split("\n"), proc.returncode


def body(example: Example, lines: list[str], returncode: int) -> str:
    """The block: the command, its output (cut at `head=`), its exit code when not 0."""
    if example.head is not None and len(lines) > example.head:
        lines = [*lines[: example.head], "..."]
    out = [f"$ {example.command}", *lines]
    if returncode:
        out += ["$ echo $?", str(returncode)]
    return "```console\n" + "\n".join(out) + "\n```\n"


def render(root: Path = ROOT, jobs: int = 2) -> dict[Path, tuple[str, str]]:
    """Each page that marks examples: (the text it holds, the text with every block run again)."""
    texts = {page: page.read_text(encoding="utf-8") for page in pages(root)}
    commands = sorted({ex.command for page, text in texts.items() for ex in examples(text, page)})
    with ThreadPoolExecutor(max_workers=jobs) as pool:  # a command two pages show runs once
        results = dict(zip(commands, pool.map(lambda cmd: run(cmd, root), commands), strict=True))
    out = {}
    for page, text in texts.items():
        if not examples(text, page):
            continue

        def fresh(m: re.Match[str], page: Path = page) -> str:
            marker = m[0][: m.start("body") - m.start()]
            example = examples(m[0], page)[0]
            return marker + body(example, *results[example.command]) + "<!-- /tcx-example -->\n"

        out[page] = (text, BLOCK.sub(fresh, text))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true", help="rewrite the pages with fresh output")
    mode.add_argument("--check", action="store_true", help="exit 1 when a page differs from fresh output")
    args = parser.parse_args(argv)
    stale = 0
    for page, (old, new) in render().items():
        if old == new:
            continue
        stale += 1
        rel = page.relative_to(ROOT)
        if args.write:
            page.write_text(new, encoding="utf-8")
            print(f"rewrote {rel}")
        else:
            sys.stdout.writelines(
                difflib.unified_diff(old.splitlines(True), new.splitlines(True), str(rel), "fresh")
            )
    if args.check and stale:
        print(f"{stale} page(s) hold examples that differ from a fresh run: python docs/examples.py --write")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
