"""Everything the tests, the benchmark and CI read lives in the repository.

A user's clone has nothing beside it, so a path that leaves the repository (a parent folder,
an absolute path of this machine) would pass here and fail for everyone else.
"""

from __future__ import annotations

import re

from conftest import REPO

SCANNED = [
    *sorted((REPO / "tests").glob("*.py")),
    *sorted((REPO / "bench").glob("*.py")),
    REPO / "Makefile",
    REPO / ".ci" / "run",
]
# A literal path that is recorded data (text to match or replace), not a file that is read.
ALLOW = "# recorded data, not read"
LEAVES_REPO = re.compile(
    r"""\.\./|\.\.\\|REPO\.parent|\.parent\.parent\.parent|parents\[[2-9]\]|["'](/work|/home|/root)/"""
)


def _leaks(path) -> list[str]:
    return [
        f"{path.relative_to(REPO)}:{n}: {line.strip()}"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if LEAVES_REPO.search(line) and ALLOW not in line
    ]


def test_nothing_reads_outside_the_repository():
    leaks = [leak for path in SCANNED for leak in _leaks(path)]
    assert not leaks, "paths that leave the repository:\n" + "\n".join(leaks)


def test_the_scan_would_catch_a_leak(tmp_path):
    probe = REPO / "tests" / "conftest.py"
    assert probe in SCANNED
    bad = tmp_path / "bad.py"
    up = ".."
    for text in (f'X = REPO{up[0]}parent / "data"', f'open("{up}/data/a.log")', 'p = "/' + 'work/data/x"'):
        bad.write_text(text + "\n")
        assert LEAVES_REPO.search(bad.read_text()), text
