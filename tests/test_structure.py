"""The house's structure: no import cycles between tcx's modules, and no view, renderer, check,
diff, report or TUI module reading the recording's raw event lists (the run model owns them:
core/model/).

Imports are read from the source (an import inside a function counts; one under
`if TYPE_CHECKING:` does not, since it never runs), with the package-dir mapping of
pyproject.toml (tcx.core = core/, ...).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import REPO

PACKAGES = {"tcx": REPO / "tcx", "tcx.cli": REPO / "cli", "tcx.core": REPO / "core"}
PACKAGES |= {"tcx.renderers": REPO / "renderers", "tcx.tui": REPO / "tui"}


def modules() -> dict[str, Path]:
    out = {}
    for package, folder in PACKAGES.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            name = ".".join((package, *parts))
            out[name.removesuffix(".__init__")] = path
    return out


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The tcx modules `path` imports when it runs (TYPE_CHECKING blocks left out)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for stmt in block.body
        for node in ast.walk(stmt)
    }
    out = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tcx"):
            for alias in node.names:  # `from tcx.core import selection` imports a module
                candidate = f"{node.module}.{alias.name}"
                out.add(candidate if candidate in known else node.module)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("tcx"))
    return {m for m in out if m in known}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycles():
    known = modules()
    graph = {name: imports(path, known) - {name} for name, path in known.items()}
    # A package imports its own face's names: `tcx.core.model` -> tcx.core.model.build is the
    # package, not a cycle, when build does not import the package back.
    assert cycles(graph) == []


# The folders of core/ are the pipeline's stages (README, "How it works"): a stage imports only the
# stages before it. Only the shared basics stay at core/'s top level.
BELOW = {
    "tcx.core.torchtext": set(),
    "tcx.core.ingest": {"tcx.core.torchtext"},
    "tcx.core.model": {"tcx.core.torchtext", "tcx.core.ingest"},
    "tcx.core.analysis": {"tcx.core.torchtext", "tcx.core.ingest", "tcx.core.model"},
}
# files: how every file tcx writes is written (never through a link); pysource: Python source as
# the interpreter reads it (its encoding and lines), for the recorder, fix, renderers and MCP alike;
# budgets: the counts `tcx check` can limit, which the CLI declares at `tcx --help` time.
BASICS = {"budgets", "errors", "files", "frames", "pysource", "selection", "selectors"}
NEVER_BELOW_THE_CLI = ("tcx.cli", "tcx.renderers", "tcx.tui", "tcx.api")


def test_each_stage_imports_only_the_stages_before_it():
    known = modules()
    core_folders = tuple(f"tcx.core.{p.name}" for p in REPO.joinpath("core").iterdir() if p.is_dir())
    offenders = []
    for name, path in known.items():
        stage = next((s for s in BELOW if name == s or name.startswith(s + ".")), None)
        for target in imports(path, known):
            above_the_cli = name.startswith("tcx.core") and target.startswith(NEVER_BELOW_THE_CLI)
            later = (
                stage and target.startswith(core_folders) and not target.startswith((stage, *BELOW[stage]))
            )
            if above_the_cli or later:
                offenders.append(f"{name} -> {target}")
    assert offenders == []
    top = {p.stem for p in REPO.joinpath("core").glob("*.py")} - {"__init__"}
    assert top == BASICS


RAW = re.compile(
    r"\bmodel\.trace_events\b|\.recorder_events\b|\b(rec|recording)\.events\b|recording\.of_kind\("
)
# The readers and the model itself may read events; views, renderers, check, diff, report, the
# TUI and the CLI read the model's facts.
READERS = ("core/model/", "core/recorder/", "core/ingest/")
READERS += ("core/run/command_run.py", "core/views/ranks.py", "core/run/rank_pool.py")  # split per rank


def test_views_renderers_and_the_cli_read_facts_not_raw_events():
    offenders = []
    for path in [*REPO.joinpath("core").rglob("*.py"), *REPO.joinpath("renderers").rglob("*.py")]:
        rel = str(path.relative_to(REPO))
        if rel.startswith(READERS):
            continue
        offenders += [
            f"{rel}:{n}" for n, line in enumerate(path.read_text().splitlines(), 1) if RAW.search(line)
        ]
    for folder in ("cli", "tui", "tcx"):
        for path in REPO.joinpath(folder).rglob("*.py"):
            rel = str(path.relative_to(REPO))
            offenders += [
                f"{rel}:{n}" for n, line in enumerate(path.read_text().splitlines(), 1) if RAW.search(line)
            ]
    assert offenders == []
