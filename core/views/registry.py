"""The view registry: every view tcx has, declared once.

A view declares its name, its JSON schema id, the captures a live run must install for it,
whether that run must compile afresh (caches off), its options, and dotted paths to `build(model,
selection, **options)` (the typed result), `to_json(result, **options)` (its JSON document) and
its terminal renderer `render(result, console, **options)`. The CLI commands, `tcx report`, the
capture plan and shell completion all read this table.

Importing it is cheap (no torch, no rich, no click): everything is referenced by dotted path and
imported only when a view runs. See "Adding a view" in the README.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

GRAPH_KINDS = ("forward", "backward", "inference")


@dataclass(frozen=True)
class Option:
    """One option of a view; the CLI turns it into a click option (core never imports click).

    `to` says who receives the value, under `dest`: "build" (the builder), "json" (the
    serializer), "render" (the terminal renderer), a document format's name (its writer, e.g.
    "markdown"), "run" (the live run's RunOptions) or "cli" (the view's own command)."""

    flags: tuple[str, ...]
    dest: str
    help: str
    to: tuple[str, ...] = ("build",)
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    multiple: bool = False
    is_flag: bool = False
    type: type = str


@dataclass(frozen=True)
class View:
    name: str
    schema: str
    help: str  # the command's one-line help
    build: str  # "module:function" -> build(model, selection, **options) -> typed result
    to_json: str  # "module:function" -> to_json(result, **options) -> dict (envelope first)
    render: str  # "module:function" -> render(result, console, **options): the terminal
    captures: tuple[str, ...] = ()  # recorder captures (core/recorder/captures.CAPTURES) it reads
    # A live run uses the program's own backend, mode and options; `fresh_compile` views also turn
    # the compile caches off, because a cache hit skips the stages they show (AOT graphs, fusion,
    # kernels). The others keep the caches as the program has them: breaks, guards and recompiles
    # are Dynamo's decisions, made on every run, and a warm cache is what makes the program fast.
    fresh_compile: bool = False
    options: tuple[Option, ...] = ()
    # Formats besides text (the renderer) and json (the serializer): (format, "module:function"
    # -> write(result, **options) -> str), e.g. check's SARIF. renderers/formats.py writes them all.
    documents: tuple[tuple[str, str], ...] = ()
    command: str | None = None  # "module:attr" of a hand-written click command; None: generated
    # "module:function" -> runner(params) -> the loaded run, for a view whose program TARGET needs more than
    # one recorded run (`tcx numerics`); the CLI command and the MCP tool call it for a program.
    runner: str | None = None
    report_title: str | None = None  # its section in `tcx report` (None: not a section)

    def builder(self) -> Callable[..., Any]:
        builder: Callable[..., Any] = _resolve(self.build)
        return builder

    def serializer(self) -> Callable[..., dict[str, Any]]:
        serializer: Callable[..., dict[str, Any]] = _resolve(self.to_json)
        return serializer

    def live_runner(self) -> Callable[[dict[str, Any]], Any] | None:
        """The runner of a program TARGET, for a view that needs more than one recorded run."""
        if self.runner is None:
            return None
        runner: Callable[[dict[str, Any]], Any] = _resolve(self.runner)
        return runner

    def renderer(self) -> Callable[..., None]:
        renderer: Callable[..., None] = _resolve(self.render)
        return renderer

    @property
    def formats(self) -> tuple[str, ...]:
        return ("text", "json", *(fmt for fmt, _ in self.documents))

    def document_writer(self, fmt: str) -> Callable[..., str | Iterable[str]]:
        """The writer of `fmt`: its document as one text, or in pieces (a big HTML page)."""
        writer: Callable[..., str | Iterable[str]] = _resolve(dict(self.documents)[fmt])
        return writer

    def options_for(self, to: str, params: dict[str, Any]) -> dict[str, Any]:
        """The option values (from the command's params) that go to `to`."""
        return {o.dest: params.get(o.dest) for o in self.options if to in o.to}


def _resolve(path: str) -> Any:
    module, _, attr = path.partition(":")
    return getattr(importlib.import_module(module), attr)


# The selectors every view takes (core/selectors.py narrows the Selection with them), and `--all`:
# a per-compile view that would print pages about many compiles prints an index first
# (core/views/index.py) unless a selector or --all is given.
SELECTORS: tuple[Option, ...] = (
    Option(
        ("--compile", "compiles"),
        "compiles",
        "Only this compile id (e.g. 0/1); repeatable; a range: 3/0-3/4.",
        to=("cli",),
        metavar="ID",
        multiple=True,
    ),
    Option(
        ("--kernel", "kernel"),
        "kernel",
        "Only the compiles that generated this kernel (name or part); codegen shows only that kernel.",
        to=("cli",),
        metavar="NAME",
    ),
    Option(
        ("--rank", "ranks"),
        "ranks",
        "Only this rank of a multi-rank log (repeatable).",
        to=("cli",),
        metavar="N",
        multiple=True,
        type=int,
    ),
    Option(
        ("--all", "show_all"),
        "show_all",
        "Print everything, even when the output would be pages long (default on big runs: an index).",
        to=("cli",),
        is_flag=True,
    ),
)

VIEWS: tuple[View, ...] = (
    View(
        name="explain",
        schema="tcx.explain/1",
        help="Why did TARGET graph-break, where, and what to change.",
        build="tcx.core.views.explain:explain",
        to_json="tcx.core.views.explain:to_json",
        render="tcx.renderers.explain_terminal:render_explain",
        report_title="Graph breaks",
    ),
    View(
        name="check",
        schema="tcx.check/1",
        help="Fail (exit 1) when TARGET exceeds a budget: a CI gate on graph breaks and recompiles.",
        build="tcx.core.views.explain:explain",  # then core/views/check.evaluate against the budgets
        to_json="tcx.renderers.check_output:check_json",
        render="tcx.renderers.check_output:render_text",
        documents=(
            ("sarif", "tcx.renderers.check_output:sarif_text"),
            ("github", "tcx.renderers.check_output:github"),
        ),
        command="tcx.cli.cmd_check:command",
    ),
    View(
        name="recompiles",
        schema="tcx.recompiles/1",
        help="Replay the calls: which hit the cache, which recompiled, which guard failed and why.",
        build="tcx.core.views.recompiles:analyze",
        to_json="tcx.core.views.recompiles:to_json",
        render="tcx.renderers.recompiles_terminal:render_recompiles",
        captures=("recompiles",),
        options=(
            Option(
                ("--what-if", "what_if"),
                "what_if",
                "After the run, say which cache entry would serve these inputs (same syntax as --call; "
                "arguments left out keep the last call's values), or which guard would fail. Repeatable.",
                to=("run",),
                metavar="SPEC",
                multiple=True,
            ),
        ),
        command="tcx.cli.cmd_recompiles:command",
        report_title="Recompiles",
    ),
    View(
        name="guards",
        schema="tcx.guards/1",
        help="Every cache entry of TARGET's frames: its guards, what they protect, which line caused each.",
        build="tcx.core.views.guards:build_guards",
        to_json="tcx.core.views.guards:to_json",
        render="tcx.renderers.guards_terminal:render_guards",
        captures=("guards",),
        options=(
            Option(
                ("--all-text", "full"),
                "full",
                "Print TENSOR_MATCH guards as torch wrote them, dispatch keys included (default: described).",
                to=("render",),
                is_flag=True,
            ),
        ),
        report_title="Guards",
    ),
    View(
        name="trace",
        schema="tcx.trace/1",
        help="What Dynamo did while it traced TARGET: each instruction's simulated stack and FX nodes.",
        build="tcx.core.views.trace:build_trace",
        to_json="tcx.core.views.trace:to_json",
        render="tcx.renderers.trace_terminal:render_trace",
        captures=("instructions", "guards"),
        options=(
            Option(
                ("--limit", "limit"),
                "limit",
                "Instructions shown per compile (text default 400, JSON default all; 0 = all).",
                to=("json", "render"),
                metavar="N",
                type=int,
            ),
        ),
        report_title="Dynamo's trace",
    ),
    View(
        name="bytecode",
        schema="tcx.bytecode/1",
        help="Original vs Dynamo's transformed bytecode per compiled frame, as Python, and how the pieces "
        "chain.",
        build="tcx.core.views.bytecode:build_bytecode",
        to_json="tcx.core.views.bytecode:to_json",
        render="tcx.renderers.bytecode_terminal:render_bytecode",
        captures=("bytecode",),
        report_title="Bytecode",
    ),
    View(
        name="graphs",
        schema="tcx.graphs/1",
        help="Per compile: the graphs, what the forward saves for backward, and what backward recomputes.",
        build="tcx.core.views.graphs:build_graphs",
        to_json="tcx.core.views.graphs:to_json",
        render="tcx.renderers.graphs_terminal:render_graphs",
        captures=("aot_graphs",),
        fresh_compile=True,
        options=(
            Option(
                ("--show", "show"),
                "show",
                "Which graph texts to print (repeatable; default: dynamo, forward, backward, inference).",
                to=("render",),
                choices=("dynamo", "joint", *GRAPH_KINDS, "post_grad", "all", "none"),
                multiple=True,
            ),
        ),
        report_title="Graphs",
    ),
    View(
        name="fusion",
        schema="tcx.fusion/1",
        help="Inductor's fusion per graph: scheduler nodes, fused groups, kernels, rejected pairs and why.",
        build="tcx.core.views.fusion:build_fusion",
        to_json="tcx.core.views.fusion:to_json",
        render="tcx.renderers.fusion_terminal:render_fusion",
        captures=("fusion", "codegen"),
        fresh_compile=True,
        options=(
            Option(
                ("--target", "target_device"),
                "target_device",
                "cuda[:sm_XX]: the fusion decisions of the CUDA preview (no GPU needed; needs triton).",
                to=("cli",),
                metavar="cpu|cuda[:sm_XX]",
            ),
            Option(("--graph", "graph"), "graph", "Only this graph.", choices=GRAPH_KINDS),
        ),
        command="tcx.cli.cmd_fusion:command",
        report_title="Fusion",
    ),
    View(
        name="codegen",
        schema="tcx.codegen/1",
        help="The kernels and wrapper Inductor generated for TARGET (Triton or C++), annotated.",
        build="tcx.core.views.codegen:build_codegen",
        to_json="tcx.core.views.codegen:to_json",
        render="tcx.renderers.codegen_terminal:render_codegen",
        captures=("codegen",),
        fresh_compile=True,
        options=(
            Option(
                ("--target", "target_device"),
                "target_device",
                "Show the code for this device: cuda[:sm_80|sm_90|...] previews the Triton kernels "
                "and wrapper Inductor would generate for that GPU, without a GPU (needs triton).",
                to=("cli",),
                metavar="cpu|cuda[:sm_XX]",
            ),
            Option(("--graph", "graph"), "graph", "Only this graph of each compile.", choices=GRAPH_KINDS),
            Option(
                ("--ptx", "ptx"),
                "ptx",
                "With --target cuda:…: add each Triton kernel's PTX (Triton AOT).",
                to=("cli",),
                is_flag=True,
            ),
            Option(
                ("--no-lifetimes", "no_lifetimes"),
                "no_lifetimes",
                "Leave out the buffer-lifetime timelines.",
                to=("cli",),
                is_flag=True,
            ),
        ),
        command="tcx.cli.cmd_codegen:command",
        report_title="Generated code",
    ),
    View(
        name="cache",
        schema="tcx.cache/1",
        help="Why is my warm start slow: cache hits, misses and bypasses per compile and why, and where "
        "compile time goes (a program runs cold, then warm; `tcx cache A B` compares two runs).",
        build="tcx.core.views.cache:build_cache",
        to_json="tcx.core.views.cache:to_json",
        render="tcx.renderers.cache_terminal:render_cache",
        # Its "caches" capture (caches on, in a private folder) is asked for by its command only:
        # `tcx report` records with the caches off to see every stage, and shows its compile times here.
        command="tcx.cli.cmd_cache:command",
        report_title="Compile time and caches",
    ),
    View(
        name="cudagraphs",
        schema="tcx.cudagraphs/1",
        help='Under mode="reduce-overhead": which graphs CUDA graphs captured, and why others were skipped.',
        build="tcx.core.views.cudagraphs:build_cudagraphs",
        to_json="tcx.core.views.cudagraphs:to_json",
        render="tcx.renderers.cudagraphs_terminal:render_cudagraphs",
        captures=("cudagraphs",),
        fresh_compile=True,
        options=(
            Option(
                ("--target", "target_device"),
                "target_device",
                "cuda[:sm_XX]: the compile-time decisions of the CUDA preview (no GPU needed).",
                to=("cli",),
                metavar="cpu|cuda[:sm_XX]",
            ),
        ),
        command="tcx.cli.cmd_cudagraphs:command",
        report_title=None,
    ),
    View(
        name="export",
        schema="tcx.export/1",
        help="Why torch.export failed or specialized, at your line, with the fix; the guards it added, the "
        "ExportedProgram's signature, AOTInductor's kernels and their provenance.",
        build="tcx.core.views.export:build_export",
        to_json="tcx.core.views.export:to_json",
        render="tcx.renderers.export_terminal:render_export",
        captures=("export",),  # the program's own exports, as it makes them: nothing is overridden
        options=(
            Option(
                ("--strict", "strict"),
                "strict",
                "With TARGET:Module (or :func), export it with strict=True (Dynamo traces it).",
                to=("cli",),
                is_flag=True,
            ),
            Option(
                ("--draft", "draft"),
                "draft",
                "With TARGET:Module (or :func), export it with torch.export.draft_export (every issue).",
                to=("cli",),
                is_flag=True,
            ),
        ),
        command="tcx.cli.cmd_export:command",
        report_title="Export",
    ),
    View(
        name="cost",
        schema="tcx.cost/1",
        help="What each graph break, recompile, skipped frame and kernel costs per call, measured and "
        "ranked: what to fix first (the program runs twice: compiled, profiled after warm-up; then eager).",
        build="tcx.core.views.cost:build_cost",
        to_json="tcx.core.views.cost:to_json",
        render="tcx.renderers.cost_terminal:render_cost",
        # Its "cost" capture (calls timed and profiled, a second force_eager run) is asked for by its
        # command only: `tcx report` does not time calls; it shows a cost measurement a recording has.
        # Kernel provenance; the command adds CUDA-graph decisions when the program uses a GPU (the
        # capture imports Inductor's compile_fx), and recompiles' fixes come from the trace.
        captures=("codegen",),
        command="tcx.cli.cmd_cost:command",
    ),
    View(
        name="numerics",
        schema="tcx.numerics/1",
        help="Does the compiled program compute what eager computes? Every compiled call's outputs (and "
        "gradients, parameters) judged against eager and float64; a divergence placed at its stage, graph, "
        "node, line and pass; remedies re-run (the program runs eager, compiled, and again as needed).",
        build="tcx.core.views.numerics:build_numerics",
        to_json="tcx.core.views.numerics:to_json",
        render="tcx.renderers.numerics_terminal:render_numerics",
        options=(
            Option(
                ("--rtol", "rtol"),
                "rtol",
                "Also fail any element with |compiled - eager| > atol + rtol * |eager| (default: the "
                "float64 judge only).",
                to=("cli",),
                metavar="R",
                type=float,
            ),
            Option(
                ("--atol", "atol"),
                "atol",
                "With --rtol: the absolute part (default 0).",
                to=("cli",),
                metavar="A",
                type=float,
            ),
            Option(
                ("--multiplier", "multiplier"),
                "multiplier",
                "A compiled value diverges when its error against float64 exceeds M x eager's own "
                "(default: torch's, 2; 3 for bfloat16 and float16).",
                to=("cli",),
                metavar="M",
                type=float,
            ),
            Option(
                ("--max-runs", "max_runs"),
                "max_runs",
                "After the comparison, at most N more runs: a localization run when the compiled run could "
                "not place the first divergence itself, then one per remedy (default 3; 0: none).",
                to=("cli",),
                metavar="N",
                type=int,
            ),
        ),
        command="tcx.cli.cmd_numerics:command",
        runner="tcx.cli.cmd_numerics:numerics_run",
    ),
    View(
        name="report",
        schema="tcx.report/1",
        help="Everything tcx knows about a run: per-frame pipeline, top problems, then every view.",
        build="tcx.core.views.report:build_report",
        to_json="tcx.core.views.report:to_json",
        render="tcx.renderers.report_output:render_text",
        fresh_compile=True,
        options=(
            Option(
                ("--full", "full"),
                "full",
                "Every view whole after the overview (default: the overview, which says what each view "
                "shows and the command for it; with --format markdown a PR-sized summary under 60 KB).",
                to=("markdown", "render"),
                is_flag=True,
            ),
        ),
        documents=(
            ("html", "tcx.renderers.report_output:report_html"),
            ("markdown", "tcx.renderers.report_output:report_markdown"),
        ),
        command="tcx.cli.cmd_report:command",
    ),
    View(
        name="diff",
        schema="tcx.diff/1",
        help="Compare run A with run B: breaks added/removed, recompiles, graphs, kernels, compile time.",
        build="tcx.core.views.run_facts:run_facts",  # per side; core/views/diff.diff compares the two
        to_json="tcx.core.views.diff:to_json",
        render="tcx.renderers.diff_output:terminal",
        documents=(("markdown", "tcx.renderers.diff_output:markdown"),),
        command="tcx.cli.cmd_diff:command",
    ),
)

_BY_NAME = {v.name: v for v in VIEWS}


def get(name: str) -> View:
    return _BY_NAME[name]


def report_views() -> list[View]:
    """The views `tcx report` shows after its overview, in reading order (explain first)."""
    return [v for v in VIEWS if v.report_title]


def all_captures() -> tuple[str, ...]:
    """Every capture a view reads: `tcx report` runs the program once with all of them."""
    return tuple(dict.fromkeys(c for v in VIEWS for c in v.captures))
