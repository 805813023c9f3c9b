"""tcx from Python: `with tcx.record() as run:`, `tcx.load(path)`, and one method per view.

    import tcx

    with tcx.record() as run:       # records the block in-process, the program's own backend
        model(x)
    run.explain()                   # rendered in a notebook; plain text in repr()
    run.explain().graph_break_count # the view's typed result: its counts are attributes
    run.guards(compile="0/1").to_json()
    run.save("run.tcx")             # tcx explain run.tcx

The view methods are generated from the view registry (core/views/registry.py): each builds its view with
the registry's builder, on the Selection the CLI would make (core/selectors.choose), and its
result serializes with the registry's JSON serializer and renders with its terminal renderer.
Importing this module imports neither torch nor rich: recording imports torch, rendering rich.
"""

from __future__ import annotations

import inspect
import os
import sys
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tcx.core.errors import UsageError
from tcx.core.views.registry import VIEWS, Option, View, get

if TYPE_CHECKING:
    from tcx.core.model import RunModel
    from tcx.core.recorder.inprocess import InProcessRecorder
    from tcx.core.selection import Selection

F = TypeVar("F", bound=Callable[..., Any])
# The options a method takes: the ones its builder, serializer or renderer reads (not the live
# run's, nor those the CLI turns into something else, such as codegen's --target).
API_TARGETS = frozenset({"build", "json", "render"})
# Views whose registry entry composes a result from other builds: written out below.
COMPOSED = ("check", "diff")
# What a recording captures by default: every capture a view reads, as `tcx report` records.
ALL_CAPTURES = "all"


def record(
    fn: F | None = None,
    *,
    backend: str | None = None,
    captures: tuple[str, ...] | str = ALL_CAPTURES,
    label: str | None = None,
) -> Any:
    """Record torch.compile in this process: `with tcx.record() as run:` or `@tcx.record()`.

    backend: the backend every `torch.compile()` called in the block uses; None (the default)
        keeps what the program asks (a model compiled before the block keeps its own).
    captures: the optional captures to install ("all": every view's, as `tcx report` records;
        () records only what `explain`, `check` and `recompiles` counts need, at a plain run's cost).
        Installed hooks stay for the process and write nothing outside a recorded block.
    label: the run's target in reports (default: where `tcx.record()` was called).

    Dynamo is reset as the block starts and ends, so every frame in the block compiles and is
    recorded; the compile caches are off in the block when a capture of the graph and kernel views
    is recorded (a cache hit would skip the stages they show), else as the program has them. An
    exception in the block is recorded and raised again. As a decorator each call is recorded
    anew: the latest is `fn.run`.
    """
    where = label or _caller_label()
    recorder = Recorder(backend=backend, captures=_captures(captures), label=where)
    return recorder(fn) if fn is not None else recorder


def load(path: str | os.PathLike[str]) -> Run:
    """Open a recording (`tcx ... --save FILE`, `run.save(FILE)`) or a TORCH_TRACE log file or
    directory; `FILE:func` selects one function's compiles. Never runs anything."""
    from tcx.core.run.inputs import open_file

    text = os.fspath(path)
    model, function = open_file(text)
    return Run(model, function, source=text)


class Recorder:
    """What `tcx.record()` returns: a context manager (`as run` gives the Run) and a decorator."""

    def __init__(self, *, backend: str | None, captures: tuple[str, ...], label: str) -> None:
        self.backend, self.captures, self.label = backend, captures, label
        self.run: Run | None = None

    def __enter__(self) -> Run:
        from tcx.core.recorder.inprocess import InProcessRecorder

        if self.run is not None:
            raise UsageError("this tcx.record() has recorded its block already; call tcx.record() again.")
        recorder = InProcessRecorder(
            self.label, backend=self.backend, captures=self.captures, caches=_caches_for(self.captures)
        )
        recorder.__enter__()
        self.run = Run(None, None, recorder=recorder, source=self.label)
        return self.run

    def __exit__(self, *exc: Any) -> None:
        assert self.run is not None and self.run._recorder is not None
        self.run._recorder.__exit__(*exc)  # an exception in the block is recorded, then raised again

    def __call__(self, fn: F) -> F:
        from tcx.core.recorder.inprocess import record_each_call

        def fresh() -> Recorder:
            return Recorder(backend=self.backend, captures=self.captures, label=self.label)

        return record_each_call(fn, fresh)  # type: ignore[return-value]


class Run:
    """A recorded run (`tcx.record()`) or an opened recording or log (`tcx.load()`).

    One method per view (`run.explain()`, `run.guards()`, …; `dir(run)` lists them), each taking
    `selection` (a function name, as `TARGET:func`), `compile` (an id such as "0/1", a range
    "3/0-3/4", or a list), `kernel` and `rank`, plus the view's own options."""

    def __init__(
        self,
        model: RunModel | None,
        function: str | None,
        *,
        recorder: InProcessRecorder | None = None,
        source: str = "",
    ) -> None:
        self._model = model
        self.function = function
        self.source = source
        self._recorder = recorder
        if recorder is not None:
            weakref.finalize(self, recorder.cleanup)

    @property
    def model(self) -> RunModel:
        """The run's model (core/model/run.RunModel): compiles, graph breaks, recompiles, events."""
        if self._model is None:
            recorder = self._recorder
            if recorder is None or not recorder.finished:
                raise UsageError("this run is still recording: use it after its `with` block ends.")
            from tcx.core.model import build_model
            from tcx.core.run.observed import check_capture

            model = build_model(recorder.recording(), "live")
            check_capture(model)
            self._model = model
        return self._model

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the recording to `path` (`.gz` compresses); the CLI reads it (`tcx explain PATH`)."""
        from tcx.core.ingest.recording import save_copy

        dest = Path(path)
        if self._recorder is not None:
            if not self._recorder.finished:
                raise UsageError("this run is still recording: save it after its `with` block ends.")
            self._recorder.save(dest)
        elif self.model.source_kind == "recording":
            save_copy(self.model.source, dest)
        else:
            raise UsageError(
                f"{self.source!r} is a TORCH_TRACE log: tcx reads it as it is (tcx explain {self.source})."
            )
        return dest

    def select(
        self,
        selection: str | Selection | None = None,
        *,
        compile: str | list[str] | tuple[str, ...] | None = None,
        kernel: str | None = None,
        rank: int | list[int] | tuple[int, ...] | None = None,
    ) -> Selection:
        """The compiles a view is built on: `selection`'s (a function name, or a Selection), narrowed
        by `compile`, `kernel` and `rank` as the CLI's `--compile`, `--kernel`, `--rank` narrow."""
        from tcx.core.selection import Selection
        from tcx.core.selectors import Selectors, choose, narrow

        selectors = Selectors(compiles=_strings(compile, "compile"), kernel=kernel, ranks=_ints(rank))
        if isinstance(selection, Selection):
            return narrow(self.model, selection, selectors)
        if selection is not None and not isinstance(selection, str):
            raise TypeError(
                f"selection must be a function name or a Selection, not {type(selection).__name__}"
            )
        return choose(self.model, selection or self.function, selectors)

    def check(self, selection: str | Selection | None = None, **budgets: Any) -> ViewResult:
        """Judge the run against budgets (`max_graph_breaks=0`, `max_recompiles=1`, …) as `tcx check`
        does (without a warm run or a baseline); `.passed` says whether it stayed within them."""
        from tcx.core.budgets import BUDGETS
        from tcx.core.views.check import budgets_from, evaluate

        allowed = [k for k, b in BUDGETS.items() if b.judged_on != "warm"]
        unknown = sorted(set(budgets) - set(allowed))
        if unknown:
            raise TypeError(f"check() got unknown budget(s) {unknown}; budgets: {', '.join(allowed)}")
        values = {k: BUDGETS[k].type(v) for k, v in budgets.items() if v is not None}
        if not values:
            raise TypeError("check() needs at least one budget, e.g. run.check(max_graph_breaks=0)")
        view = get("check")
        explanation = view.builder()(self.model, self.select(selection))
        return ViewResult(view, evaluate(explanation, budgets_from(values)))

    def diff(self, other: Run, selection: str | Selection | None = None) -> ViewResult:
        """What changed from this run (A) to `other` (B), as `tcx diff A B` says it."""
        from tcx.core.views.diff import diff

        if not isinstance(other, Run):
            raise TypeError(f"diff() compares two runs, not a {type(other).__name__}")
        view = get("diff")
        facts = [view.builder()(run.model, run.select(selection)) for run in (self, other)]
        return ViewResult(view, diff(*facts))

    def __repr__(self) -> str:
        if self._model is None and self._recorder is not None and not self._recorder.finished:
            return f"<tcx.Run {self.source} (recording)>"
        m = self.model
        return (
            f"<tcx.Run {m.target}: {len(m.compiles)} compiles, {m.graph_count} graphs, "
            f"{len(m.graph_breaks)} graph breaks, {m.recompile_count} recompiles>"
        )

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *(v.name for v in VIEWS)})


class ViewResult:
    """A view's typed result (`.value`, e.g. core/views/explain.Explanation), shown where it is shown:
    rich's console protocol in a terminal, `_repr_html_` in Jupyter and VS Code, plain text in
    `repr()`. Its attributes are the result's (`.graph_break_count`); `.to_json()` is the view's
    JSON document, the one `tcx VIEW --format json` prints."""

    def __init__(
        self,
        view: View,
        value: Any,
        json_options: dict[str, Any] | None = None,
        render_options: dict[str, Any] | None = None,
    ) -> None:
        self.view = view
        self.value = value
        self.json_options = json_options or {}
        self.render_options = render_options or {}

    def to_json(self) -> dict[str, Any]:
        return self.view.serializer()(self.value, **self.json_options)

    def render(self, console: Any) -> None:
        """Print the view to a rich Console, as the CLI prints it."""
        self.view.renderer()(self.value, console, **self.render_options)

    def text(self, width: int = 100) -> str:
        """The view as plain text, `width` columns wide."""
        from tcx.renderers.display import plain_text

        return plain_text(self.render, width)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("view", "value"):
            raise AttributeError(name)
        return getattr(self.value, name)

    def __dir__(self) -> list[str]:
        return sorted({*super().__dir__(), *(n for n in dir(self.value) if not n.startswith("_"))})

    def __rich_console__(self, console: Any, options: Any) -> Any:
        from tcx.renderers.display import for_console

        yield for_console(self.render, console, options.max_width)

    def _repr_html_(self) -> str:
        from tcx.renderers.report_output import fragment_html

        return fragment_html(self.render)

    def __repr__(self) -> str:
        return self.text()

    __str__ = __repr__


def _view_method(view: View) -> Callable[..., ViewResult]:
    """`run.<view>(selection=None, *, compile=None, kernel=None, rank=None, **options)`."""
    options = [o for o in view.options if API_TARGETS & set(o.to)]

    def method(
        self: Run,
        selection: str | Selection | None = None,
        *,
        compile: str | list[str] | tuple[str, ...] | None = None,
        kernel: str | None = None,
        rank: int | list[int] | tuple[int, ...] | None = None,
        **given: Any,
    ) -> ViewResult:
        values = _option_values(view, options, given)
        chosen = self.select(selection, compile=compile, kernel=kernel, rank=rank)
        result = view.builder()(self.model, chosen, **view.options_for("build", values))
        return ViewResult(view, result, view.options_for("json", values), view.options_for("render", values))

    method.__name__ = method.__qualname__ = view.name
    method.__qualname__ = f"Run.{view.name}"
    method.__doc__ = _method_doc(view, options)
    base = inspect.signature(method)
    params = [p for p in base.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    params += [
        inspect.Parameter(
            o.dest, inspect.Parameter.KEYWORD_ONLY, default=_default(o), annotation=_annotation(o)
        )
        for o in options
    ]
    method.__signature__ = base.replace(parameters=params)  # type: ignore[attr-defined]
    return method


def _option_values(view: View, options: list[Option], given: dict[str, Any]) -> dict[str, Any]:
    """The options as the CLI would pass them (unset: None, a flag False, a repeatable one ()),
    each checked against its declaration."""
    known = {o.dest: o for o in options}
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise TypeError(
            f"{view.name}() got unexpected keyword(s) {unknown}; its options: "
            + (", ".join(known) or "none")
            + " (and selection, compile, kernel, rank)"
        )
    values = {}
    for dest, opt in known.items():
        value = given.get(dest, _default(opt))
        if opt.multiple:
            value = tuple(_strings(value, dest)) if opt.type is str else tuple(_ints(value))
        elif opt.is_flag:
            value = bool(value)
        elif value is not None and not isinstance(value, opt.type):
            raise TypeError(f"{view.name}({dest}=...) takes {opt.type.__name__}, not {type(value).__name__}")
        for item in value if opt.multiple else (value,):
            if opt.choices and item is not None and item not in opt.choices:
                raise UsageError(f"{view.name}({dest}={item!r}): choose one of {', '.join(opt.choices)}.")
        values[dest] = value
    return values


def _default(opt: Option) -> Any:
    return False if opt.is_flag else () if opt.multiple else None


def _annotation(opt: Option) -> Any:
    if opt.is_flag:
        return bool
    return tuple[opt.type, ...] if opt.multiple else opt.type | None


def _method_doc(view: View, options: list[Option]) -> str:
    lines = [
        view.help,
        "",
        f"Returns the `{view.name}` view (JSON schema {view.schema}) of the selected compiles:",
        "selection (a function name), compile (e.g. '0/1', a range '3/0-3/4', or a list), kernel, rank.",
    ]
    if view.captures:
        lines.append(f"Reads the captures {', '.join(view.captures)} (recorded by tcx.record() by default).")
    lines += [f"{o.dest}: {o.help}" for o in options]
    return "\n".join(lines)


def _strings(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return tuple(value)
    raise TypeError(f"{what} takes a string or a list of strings, not {value!r}")


def _ints(value: Any) -> tuple[int, ...]:
    if value is None:
        return ()
    if isinstance(value, int) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, (list, tuple)) and all(
        isinstance(v, int) and not isinstance(v, bool) for v in value
    ):
        return tuple(value)
    raise TypeError(f"rank takes an int or a list of ints, not {value!r}")


def _captures(captures: tuple[str, ...] | str) -> tuple[str, ...]:
    from tcx.core.views.registry import all_captures

    if captures == ALL_CAPTURES:
        return all_captures()
    if isinstance(captures, str):
        return (captures,)
    return tuple(captures)


def _caches_for(captures: tuple[str, ...]) -> str:
    """ "off" when a view that must see every stage compiled (the registry's `fresh_compile`: graphs,
    kernels) reads one of these captures, as its live run would; else the program's own caches."""
    fresh = any(v.fresh_compile and set(v.captures) & set(captures) for v in VIEWS)
    return "off" if fresh else "program"


def _caller_label() -> str:
    """`tcx.record() at FILE:LINE` for the code that called tcx.record()."""
    frame = sys._getframe(2)  # record() <- its caller
    return f"tcx.record() at {frame.f_code.co_filename}:{frame.f_lineno}"


for _view in VIEWS:
    if _view.name not in COMPOSED:
        setattr(Run, _view.name, _view_method(_view))
