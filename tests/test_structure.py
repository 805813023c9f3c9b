"""The house's structure: no import cycles between tcx's modules, and no module outside the run model
(core/model/) and the readers (core/ingest/) reading the recording's raw events: the model owns
them; `tcx show --events` reads them through the model's one deliberate handle.

Imports are read from the source (an import inside a function counts; one under
`if TYPE_CHECKING:` does not, since it never runs), with the package-dir mapping of
pyproject.toml (tcx.core = core/, ...).
"""

from __future__ import annotations

import ast
import functools
import re
import shutil
from pathlib import Path

import pytest
from conftest import REPO

PACKAGES = {
    "tcx": "tcx",
    "tcx.cli": "cli",
    "tcx.core": "core",
    "tcx.renderers": "renderers",
    "tcx.tui": "tui",
}


def modules(root: Path = REPO) -> dict[str, Path]:
    out = {}
    for package, folder_name in PACKAGES.items():
        folder = root / folder_name
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            name = ".".join((package, *parts))
            out[name.removesuffix(".__init__")] = path
    return out


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The tcx modules `path` imports when it runs (TYPE_CHECKING blocks left out)."""
    out = set()
    for module, names in _imported(path.read_text(encoding="utf-8")):
        for name in names:  # `from tcx.core import selection` imports a module
            candidate = f"{module}.{name}"
            out.add(candidate if candidate in known else module)
        if not names:
            out.add(module)
    return {m for m in out if m in known}


@functools.cache
def _imported(source: str) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(module, names) of each tcx import in `source` (names empty for `import tcx.x`): parsed once
    per text, so the tests that plant one import in a copied tree parse only the planted file."""
    tree = ast.parse(source)
    skipped = {
        id(node)
        for block in ast.walk(tree)
        if isinstance(block, ast.If) and "TYPE_CHECKING" in ast.unparse(block.test)
        for stmt in block.body
        for node in ast.walk(stmt)
    }
    out: list[tuple[str, tuple[str, ...]]] = []
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("tcx"):
            out.append((node.module, tuple(alias.name for alias in node.names)))
        elif isinstance(node, ast.Import):
            out += [(a.name, ()) for a in node.names if a.name.startswith("tcx")]
    return tuple(out)


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


# The folders of core/ are the pipeline's stages (docs/how-it-works.md): a stage imports only the
# stages before it. Only the shared basics stay at core/'s top level. The upper floors: the cost
# measurements and the numerics judgement are read by views; the run (targets, the driver, loading)
# and fix (rewrite, re-run, compare) use views; views never import them back.
LOWER = {"tcx.core.torchtext", "tcx.core.ingest", "tcx.core.model", "tcx.core.analysis"}
BELOW = {
    "tcx.core.torchtext": set(),
    "tcx.core.ingest": {"tcx.core.torchtext"},
    "tcx.core.model": {"tcx.core.torchtext", "tcx.core.ingest"},
    "tcx.core.analysis": {"tcx.core.torchtext", "tcx.core.ingest", "tcx.core.model"},
    "tcx.core.cost": LOWER,
    "tcx.core.numerics": LOWER,
    "tcx.core.views": LOWER | {"tcx.core.cost", "tcx.core.numerics"},
    "tcx.core.run": LOWER | {"tcx.core.cost", "tcx.core.numerics", "tcx.core.views"},
    "tcx.core.fix": LOWER | {"tcx.core.cost", "tcx.core.numerics", "tcx.core.views"},
    # the child process: writes events (ingest's schema), reads torch's text, hooks numerics' probes
    "tcx.core.recorder": {"tcx.core.torchtext", "tcx.core.ingest", "tcx.core.model", "tcx.core.numerics"},
}
# files: how every file tcx writes is written (never through a link); pysource: Python source as
# the interpreter reads it (its encoding and lines), for the recorder, fix, renderers and MCP alike;
# budgets: the counts `tcx check` can limit, which the CLI declares at `tcx --help` time.
BASICS = {"budgets", "errors", "files", "frames", "pysource", "selection", "selectors"}
NEVER_BELOW_THE_CLI = ("tcx.cli", "tcx.renderers", "tcx.tui", "tcx.api")
# Above core: the renderers never import the CLI or the TUI, the TUI never the CLI.
NEVER_FROM = {"tcx.renderers": ("tcx.cli", "tcx.tui"), "tcx.tui": ("tcx.cli",)}


def stage_offenders(root: Path = REPO) -> list[str]:
    """Every import (lazy ones included) from a stage of core/ into a later one, or into the CLI."""
    known = modules(root)
    core_folders = tuple(f"tcx.core.{p.name}." for p in root.joinpath("core").iterdir() if p.is_dir())
    offenders = []
    for name, path in known.items():
        stage = next((s for s in BELOW if name == s or name.startswith(s + ".")), None)
        for target in imports(path, known):
            above_the_cli = name.startswith("tcx.core") and target.startswith(NEVER_BELOW_THE_CLI)
            above_the_cli |= any(
                name.startswith(p) and target.startswith(forbidden) for p, forbidden in NEVER_FROM.items()
            )
            later = (
                stage
                and (target + ".").startswith(core_folders)
                and not (target + ".").startswith(tuple(f"{s}." for s in (stage, *BELOW[stage])))
            )
            if above_the_cli or later:
                offenders.append(f"{name} -> {target}")
    return offenders


def may_import(init: Path) -> str | None:
    """The paragraph of a package's docstring that says what it may import (None: it has none)."""
    doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
    return next((p for p in doc.split("\n\n") if p.startswith(MAY_IMPORT)), None)


MAY_IMPORT = "May import (tests/test_structure.py holds it):"


def test_each_package_says_what_it_may_import_as_the_stages_hold_it():
    """Every package's __init__.py has its `May import` paragraph; a stage of core/ lists exactly the
    stages before it (the folders named before a `; never` or `; not`)."""
    inits = sorted(p for folder in PACKAGES.values() for p in REPO.joinpath(folder).rglob("__init__.py"))
    missing = [p.relative_to(REPO).as_posix() for p in inits if may_import(p) is None]
    assert missing == []
    for stage, below in BELOW.items():
        text = may_import(REPO / "core" / stage.rsplit(".", 1)[1] / "__init__.py") or ""
        allowed = re.split(r";\s*(?:never|not)\b", text)[0]
        assert set(re.findall(r"core/(\w+)", allowed)) == {s.rsplit(".", 1)[1] for s in below}, stage


def package(name: str) -> str:
    """The unit a package-level cycle is made of: a folder of core/ or one of its basics, the CLI,
    the renderers, the TUI, or a module of the top-level package."""
    parts = name.split(".")
    if name.startswith("tcx.core."):
        return ".".join(parts[:3])
    return ".".join(parts[:2]) if parts[1:2] in (["cli"], ["renderers"], ["tui"]) else name


def package_cycles(root: Path = REPO) -> list[list[str]]:
    known = modules(root)
    graph: dict[str, set[str]] = {}
    for name, path in known.items():
        graph.setdefault(package(name), set()).update(package(t) for t in imports(path, known))
    return cycles({name: targets - {name} for name, targets in graph.items()})


def test_each_stage_imports_only_the_stages_before_it():
    assert stage_offenders() == []
    top = {p.stem for p in REPO.joinpath("core").glob("*.py")} - {"__init__"}
    assert top == BASICS


def test_no_package_level_cycle_lazy_imports_included():
    assert package_cycles() == []


@pytest.fixture(scope="module")
def tree_copy(tmp_path_factory):
    """A copy of the product's source tree, to plant imports and reads in."""
    root = tmp_path_factory.mktemp("tree")
    for folder in ("core", "cli", "renderers", "tui", "tcx"):
        shutil.copytree(REPO / folder, root / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def _plant(path: Path, code: str) -> str:
    before = path.read_text()
    path.write_text(before + "\n\n" + code)
    return before


@pytest.mark.parametrize(
    ("module", "code", "offender"),
    [
        (  # cost taking a view's constant: the cycle core/cost/trace.py had
            "core/cost/trace.py",
            "from tcx.core.views.cost import build_cost\n",
            "tcx.core.cost.trace -> tcx.core.views.cost",
        ),
        (  # a view lazily importing the run: the one core/views/explain.py had
            "core/views/explain.py",
            "def _ranks(m):\n    from tcx.core.run.targets import resolve_target\n\n    return m\n",
            "tcx.core.views.explain -> tcx.core.run.targets",
        ),
        (  # the run importing fix, which the layering does not list
            "core/run/observed.py",
            "def _f():\n    import tcx.core.fix.verify\n",
            "tcx.core.run.observed -> tcx.core.fix.verify",
        ),
        (  # the recorder (the child process) importing a view
            "core/recorder/child.py",
            "def _f():\n    from tcx.core.views import registry\n",
            "tcx.core.recorder.child -> tcx.core.views.registry",
        ),
        (  # a renderer importing the CLI
            "renderers/safe.py",
            "def _f():\n    from tcx.cli import common\n",
            "tcx.renderers.safe -> tcx.cli.common",
        ),
    ],
)
def test_a_planted_import_against_the_stages_fails(tree_copy, module, code, offender):
    assert stage_offenders(tree_copy) == []
    before = _plant(tree_copy / module, code)
    try:
        assert stage_offenders(tree_copy) == [offender]
    finally:
        (tree_copy / module).write_text(before)


@pytest.mark.parametrize(
    ("module", "code", "cycle"),
    [
        (  # views import cost: cost importing views (the review's views<->cost cycle) closes it
            "core/cost/findings.py",
            "def _f():\n    from tcx.core.views.recompiles import analyze\n\n    return analyze\n",
            ["tcx.core.cost", "tcx.core.views"],
        ),
        (  # the run imports views: a view importing the run (the review's views<->run cycle) closes it
            "core/views/explain.py",
            "def _f():\n    from tcx.core.run.inputs import open_file\n\n    return open_file\n",
            ["tcx.core.run", "tcx.core.views"],
        ),
        (  # fix imports views: a view importing fix at module level closes it
            "core/views/report.py",
            "import tcx.core.fix.verify\n",
            ["tcx.core.fix", "tcx.core.views"],
        ),
    ],
)
def test_a_planted_import_that_closes_a_package_cycle_fails(tree_copy, module, code, cycle):
    assert package_cycles(tree_copy) == []
    path = tree_copy / module
    before = _plant(path, code)
    try:
        assert package_cycles(tree_copy) == [cycle]
    finally:
        path.write_text(before)


# Every way code reads raw events instead of the model's facts, by any handle: the model's private
# indexes of torch's trace events and of the recorder's own (`_documents`, `_captures`), the loaded
# recording it keeps (`_recording`) and its raw-dict properties (`_run_start`, `_program_exit`,
# `_compile_calls`, `_logs`, `_calls`, `_outcome`); its deliberate raw handle (`raw_trace_events()`,
# for `tcx show --events`); a recording's events and header; and the spellings of older trees (the
# same names without the underscore).
RAW = re.compile(
    r"\._(?:documents|captures|recording|run_start|program_exit|outcome|compile_calls|calls|logs)\b"
    r"|\.raw_trace_events\("
    r"|\b(?:documents|captures)\.(?:of|first|named|census)\("
    r"|(?:\b(?:model|m)|\))\.(?:documents|captures)\b"
    r"|\.(?:run_start|program_exit|compile_calls|logs)\b"
    r"|\b(?:model|m)\.(?:recording|outcome)\b|\bmodel\.calls\b"
    r"|\b(?:rec|recording)\.(?:events|header)\b"
    r"|\bmodel\.trace_events\b|\.recorder_events\b|recording\.of_kind\("
)
# The model is built from raw events and the readers make them: they alone may read them.
READERS = ("core/model/", "core/ingest/")
# `tcx show --events/--event NAME` prints the raw events on purpose: its one renderer reads them,
# through the model's one raw handle (`raw_trace_events()`).
DELIBERATE = {"renderers/raw_events.py": 2}


def raw_reads(text: str) -> list[str]:
    """The raw reads in a module's source, as `LINE: spelling`."""
    return [f"{n}: {m.group(0)}" for n, line in enumerate(text.splitlines(), 1) for m in RAW.finditer(line)]


def raw_reads_by_file(root: Path) -> dict[str, int]:
    """How many raw reads each product module under `root` makes outside the model and the readers."""
    found = {}
    for folder in ("core", "cli", "renderers", "tui", "tcx"):
        for path in sorted(root.joinpath(folder).rglob("*.py")):
            rel = path.relative_to(root).as_posix()
            if not rel.startswith(READERS) and (count := len(raw_reads(path.read_text(encoding="utf-8")))):
                found[rel] = count
    return found


def test_views_renderers_and_the_cli_read_facts_not_raw_events():
    assert raw_reads_by_file(REPO) == DELIBERATE


@pytest.mark.parametrize(
    "line",
    [
        'for ev in model.documents.of("inductor_output_code"):',
        "walks = self.model.captures.first('cache_entries')",
        "for ev in m.documents:",
        'features = (model.run_start or {}).get("features") or {}',
        "stopped = rep.model.program_exit",
        "asked = [c for c in model.compile_calls]",
        "for log in m.logs:",
        "return rank_report(m.recording)",
        'captures = build_model(rec, "live").captures',
        'end = captures.first("program_exit")',
        "ranks = {event_rank(e) for e in rec.events}",
        "if any(c.get('function') for c in model.calls):",
        'for ev in loaded.model._documents.of("chromium_event"):',
        'features = (self.model._run_start or {}).get("features")',
        "for log in run.model._logs:",
        'frame_calls = run.model._captures.of("frame_call")',
        "rec = model._recording",
        "counts = self.model.raw_trace_events().census()",
    ],
)
def test_the_pattern_catches_each_raw_read(line):
    assert raw_reads(f"def view(model):\n    {line}\n")


@pytest.mark.parametrize(
    "line",
    [
        "from tcx.renderers.header import location, view_header",
        "fresh = view.fresh_compile and set(view.captures)",
        "eager = [c for c in report.calls if c.outcome == 'eager']",
        "asked = model.status.torch_compile_calls",
        "why = model.status.features.why('guards')",
        'run.model = build_model(recorder.recording(), "live")',
        "from tcx.renderers.raw_events import render_raw",
        "steps = model.chromium_steps()",
        "calls = model.call_captures.frame_calls",
    ],
)
def test_the_pattern_passes_facts(line):
    assert raw_reads(f"def view(model):\n    {line}\n") == []


@pytest.mark.parametrize(
    ("module", "code"),
    [
        ("core/views/envelope.py", 'def _x(model):\n    return model._captures.of("fusion")\n'),
        ("core/cost/trace.py", "def _x(model):\n    return len(model.raw_trace_events())\n"),
        ("core/recorder/child.py", "def _x(model):\n    return model._recording\n"),
    ],
)
def test_a_raw_read_planted_outside_the_model_fails(tree_copy, module, code):
    """A view, the cost stage and the recorder (which writes events, never reads a model's) alike."""
    assert raw_reads_by_file(tree_copy) == DELIBERATE
    path = tree_copy / module
    before = _plant(path, code)
    try:
        assert raw_reads_by_file(tree_copy) == DELIBERATE | {module: 1}
    finally:
        path.write_text(before)


def test_the_deliberate_raw_handle_is_counted(tree_copy):
    """`tcx show --events` reading one more raw event changes the count the test holds."""
    path = tree_copy / next(iter(DELIBERATE))
    before = _plant(path, "def _x(model):\n    return model.raw_trace_events().of('artifact')\n")
    try:
        assert raw_reads_by_file(tree_copy) == {k: v + 1 for k, v in DELIBERATE.items()}
    finally:
        path.write_text(before)


def test_the_model_alone_may_read_raw_events(tree_copy):
    model_file = tree_copy / "core" / "model" / "run.py"  # the model itself may read them
    before = _plant(model_file, "x = model._captures\n")
    try:
        assert raw_reads_by_file(tree_copy) == DELIBERATE
    finally:
        model_file.write_text(before)
