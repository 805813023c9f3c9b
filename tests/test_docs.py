"""The README and the docs site stay true: examples equal a fresh run of tcx, the site builds
strictly, the README's command table is `tcx --help`'s, every relative link resolves.

The examples run tcx on saved recordings and logs in fixtures/ (no program runs); the site is
built with the dev extra's mkdocs, mkdocs-material and mkdocs-click (`make setup`)."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO, run_tcx
from markdown.extensions.toc import slugify

README = REPO / "README.md"
DOCS = REPO / "docs"
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _examples_module():
    spec = importlib.util.spec_from_file_location("docs_examples", DOCS / "examples.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def _prose(text: str) -> str:
    """The page without its fenced code blocks and inline code (links there are not links)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def _anchors(page: Path) -> set[str]:
    fenced = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.S | re.M)
    titles = re.findall(r"^#{1,6} (.+)$", fenced, re.M)
    return {slugify(t.replace("`", ""), "-") for t in titles}


def _help_commands() -> set[str]:
    proc = run_tcx("--help")
    assert proc.returncode == 0, proc.stderr
    section = proc.stdout.split("\nCommands:\n", 1)[1].split("\n\n", 1)[0]
    return {line.split()[0] for line in section.splitlines() if line.startswith("  ") and line.split()}


def test_every_example_block_equals_a_fresh_run_of_tcx():
    """Each block a page marks is re-run (`python -m tcx ...` on its fixtures) and must equal what
    the page holds; after a renderer changes, `python docs/examples.py --write` updates them."""
    module = _examples_module()
    rendered = module.render()
    marked = sum(len(module.examples(old, page)) for page, (old, _) in rendered.items())
    assert marked >= 12, f"only {marked} example blocks are marked"
    assert README in rendered, "the README's tour is no longer made by tcx"
    stale = [str(page.relative_to(REPO)) for page, (old, new) in rendered.items() if old != new]
    assert not stale, f"examples differ from a fresh run in {stale}: run python docs/examples.py --write"
    for page, (old, _) in rendered.items():  # every block holds output, not just its command
        for m in module.BLOCK.finditer(old):
            assert m["body"].count("\n") > 3, (page, m["cmd"])


def test_an_example_block_that_drifted_is_found(tmp_path):
    """The check can fail: a page whose block no longer holds tcx's output is rewritten."""
    module = _examples_module()
    (tmp_path / "docs").mkdir()
    (tmp_path / "fixtures").symlink_to(REPO / "fixtures")
    page = tmp_path / "docs" / "page.md"
    marker = "<!-- tcx-example: tcx explain fixtures/torch-trace/tlparse-tests/inputs/comp_failure.log -->\n"
    page.write_text(f"# A page\n\n{marker}```console\nold output\n```\n<!-- /tcx-example -->\n")
    ((old, new),) = module.render(tmp_path).values()
    assert old != new and "old output" not in new
    assert "$ tcx explain fixtures/torch-trace/tlparse-tests/inputs/comp_failure.log\ntcx explain " in new


def test_the_docs_site_builds_strictly_with_the_cli_reference(tmp_path):
    """`mkdocs build --strict` (as `make lint` runs it): no broken link or anchor, no page left out
    of the navigation; the CLI reference holds every command click defines."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    reference = (tmp_path / "site" / "cli" / "index.html").read_text(encoding="utf-8")
    for name in _help_commands():
        assert f'id="tcx-{name}"' in reference, name
    assert (tmp_path / "site" / "browse.svg").is_file()  # the screenshot on docs/browse.md


def test_the_readme_is_short_and_its_command_table_is_the_clis():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    table = re.findall(r"^\| `tcx ([a-z]+)[^`]*` \|", text, re.M)
    assert len(table) == len(set(table)), "a command is listed twice"
    help_commands = _help_commands()
    assert len(help_commands) >= 20
    assert set(table) == help_commands, (set(table) - help_commands, help_commands - set(table))
    for start in ("make demo", "make test", "make test-fast", "tcx explain train.py"):
        assert start in text, start


def test_every_relative_link_in_the_readme_and_the_docs_resolves():
    pages = [README, *sorted(DOCS.glob("*.md"))]
    checked = 0
    for page in pages:
        for target in LINK.findall(_prose(page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):  # https:, mailto:
                continue
            path, _, anchor = target.partition("#")
            file = (page.parent / path).resolve() if path else page
            assert file.exists(), f"{page.name}: {target} does not exist"
            if anchor:
                assert anchor in _anchors(file), f"{page.name}: {target}: no such heading"
            checked += 1
    assert checked >= 40


def test_help_says_where_to_start_and_which_commands_run_the_program():
    proc = run_tcx("--help")
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split())
    assert "Start with `tcx explain script.py`" in text
    assert "run it a view given a script or module" in text
    assert "read it a view given FILE.tcx, TRACE.log or DIR; show; diff" in text
