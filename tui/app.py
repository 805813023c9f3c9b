"""`tcx browse`: the terminal app (textual). A tree of the run on the left, the detail on the right.

The tree (tui/index.py) is built in a worker thread and its nodes are created when a branch is
opened, so a run with thousands of guards and kernels opens at once. The detail of the item
under the cursor is rendered in a worker thread too (tui/detail.py), so moving the cursor never
waits for a view to build; rendered details are kept.

Keys: arrows move, enter/space open a branch, `/` searches (function, op, kernel names, guard
text), `n`/`N` next/previous match, `b`/`k`/`g` next break/kernel/guard (capitals: previous),
1-9 follow the item's links, backspace goes back, tab switches to the detail (arrows,
page up/down scroll it), `q` quits.
"""

from __future__ import annotations

import threading
import traceback
from collections import OrderedDict
from typing import Any, ClassVar

from rich.text import Text
from textual import work
from textual.actions import SkipAction
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Footer, Input, Static, Tree
from textual.widgets.tree import TreeNode
from textual.worker import get_current_worker

from tcx.core.model import RunModel
from tcx.core.selection import Selection
from tcx.renderers.safe import clean
from tcx.tui.detail import DetailRenderer, Rendered
from tcx.tui.index import Index, Item, build_index

KIND_STYLE = {
    "run": "bold",
    "frame": "bold",
    "compile": "bold",
    "recompile": "red",
    "break": "magenta",
    "guard": "yellow",
    "kernel": "green",
    "op": "cyan",
    "line": "cyan",
}
KIND_NAMES = {"break": "graph break", "kernel": "kernel", "guard": "guard"}
MAX_LINKS = 9
CACHE_SIZE = 64
INTERNAL = "This is a bug in tcx; rerun with TCX_DEBUG=1 for the traceback and report it."


class BrowseApp(App[None]):
    TITLE = "tcx browse"
    ENABLE_COMMAND_PALETTE = False
    CSS = """
    #main { height: 1fr; }
    #tree { width: 40%; min-width: 32; border-right: solid $primary-darken-2; }
    #right { width: 1fr; }
    #links { height: auto; max-height: 12; padding: 0 1; border-bottom: solid $primary-darken-2;
             text-wrap: nowrap; text-overflow: ellipsis; }
    #scroll { height: 1fr; padding: 0 1; }
    #detail { width: auto; }
    #status { height: 1; padding: 0 1; background: $boost; }
    #search { display: none; }
    App:nocolor Tree > .tree--cursor { text-style: reverse bold; }
    """
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("q", "quit", "quit"),
        Binding("ctrl+c", "quit", "quit", show=False, priority=True),
        # priority: handled as it arrives, so the keys typed after it go to the search box
        Binding("slash", "search", "search", priority=True),
        Binding("n", "next_match", "next match", show=False),
        Binding("N", "next_match(True)", "previous match", show=False),
        Binding("b", "jump('break')", "break"),
        Binding("B", "jump('break', True)", "previous break", show=False),
        Binding("k", "jump('kernel')", "kernel"),
        Binding("K", "jump('kernel', True)", "previous kernel", show=False),
        Binding("g", "jump('guard')", "guard"),
        Binding("G", "jump('guard', True)", "previous guard", show=False),
        Binding("1", "follow(1)", "follow link", key_display="1-9"),
        *(Binding(str(i), f"follow({i})", "follow link", show=False) for i in range(2, MAX_LINKS + 1)),
        Binding("backspace", "back", "back"),
    ]

    def __init__(self, model: RunModel, selection: Selection, *, color: bool = True) -> None:
        # Without colour (NO_COLOR, --no-color) textual drops every colour, not only greys them.
        super().__init__(ansi_color=None if color else True)
        self.model = model
        self.selection = selection
        self._renderer = DetailRenderer(model, selection, color=color)
        self.index: Index | None = None
        self.current: str | None = None
        self.failure: str | None = None  # an internal error: the command exits 5 after the app
        self.failure_traceback = ""
        self.detail = Text()  # what the detail pane shows now
        self._tree_nodes: dict[str, TreeNode[str]] = {}
        self._populated: set[str] = set()
        self._history: list[str] = []
        self._matches: list[str] = []
        self._query = ""
        self._rendered: OrderedDict[tuple[str, int], Rendered] = OrderedDict()
        self._model_lock = threading.Lock()  # one view builds at a time on the shared model

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield Tree(Text("reading the run…"), data="run", id="tree")
            with Vertical(id="right"):
                yield Static(id="links")
                with VerticalScroll(id="scroll"):
                    yield Static(id="detail")
        yield Static(id="status")
        yield Input(
            placeholder="search: function, op, kernel name or guard text (enter: go, esc: cancel)",
            id="search",
        )
        yield Footer()

    @property
    def tree_widget(self) -> Tree[str]:
        return self.query_one("#tree", Tree)

    def on_mount(self) -> None:
        self.tree_widget.focus()
        self.status("reading the run…")
        self._build_index()

    @work(thread=True, group="index")
    def _build_index(self) -> None:
        try:
            with self._model_lock:
                index = build_index(self.model, self.selection)
        except Exception as exc:  # a bug in tcx: say so in the app, exit 5 after it
            self.failure_traceback = traceback.format_exc()
            self.call_from_thread(self._fail, f"building the tree failed ({type(exc).__name__}: {exc})")
            return
        self.call_from_thread(self._indexed, index)

    def _indexed(self, index: Index) -> None:
        self.index = index
        root = self.tree_widget.root
        root.set_label(self._label(index.items[index.root]))
        self._tree_nodes[index.root] = root
        self._populate(root)
        root.expand()
        for child in root.children:  # frames open: their compiles show
            self._populate(child)
            child.expand()
        self.status(_summary(index))
        self.current = index.root
        self._show(index.root)

    def _fail(self, message: str) -> None:
        self.failure = message
        self.status(f"internal error: {message}")
        self._set_detail(Text(f"tcx: internal error: {message}. {INTERNAL}"))

    # ------------------------------------------------------------------ the tree

    def _label(self, item: Item) -> Text:
        return Text(clean(item.label), style=KIND_STYLE.get(item.kind, ""))

    def _populate(self, node: TreeNode[str]) -> None:
        key = node.data
        if self.index is None or key is None or key in self._populated:
            return
        self._populated.add(key)
        for child in self.index.items[key].children:
            item = self.index.items[child]
            label = self._label(item)
            self._tree_nodes[child] = (
                node.add(label, data=child) if item.children else node.add_leaf(label, data=child)
            )

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[str]) -> None:
        self._populate(event.node)

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[str]) -> None:
        key = event.node.data
        if self.index is not None and key in self.index.items and key != self.current:
            self.current = key
            self._show(key)

    def goto(self, key: str, *, remember: bool = True) -> None:
        """Open the tree down to `key`, put the cursor on it and show its detail."""
        if self.index is None or key not in self.index.items:
            return
        node = self.tree_widget.root
        for k in self.index.path(key)[1:]:
            self._populate(node)
            node.expand()
            node = self._tree_nodes[k]
        if remember and self.current and self.current != key:
            self._history.append(self.current)
        self.current = key
        self._show(key)
        self.call_after_refresh(self.tree_widget.move_cursor, node)

    # ------------------------------------------------------------------ the detail

    def _show(self, key: str) -> None:
        assert self.index is not None
        item = self.index.items[key]
        self.query_one("#links", Static).update(_links_text(item))
        width = self._detail_width()
        done = self._rendered.get((key, width))
        if done is not None:
            self._show_rendered(done)
            return
        self._set_detail(Text("rendering…", style="dim"))
        self._render_worker(key, item, width)

    def on_resize(self) -> None:
        if self.current is not None and self.index is not None:  # re-render at the new width
            self.call_after_refresh(self._show, self.current)

    def _detail_width(self) -> int:
        width = self.query_one("#scroll", VerticalScroll).size.width
        return max(40, width - 3) if width else 100

    @work(thread=True, exclusive=True, group="detail")
    def _render_worker(self, key: str, item: Item, width: int) -> None:
        with self._model_lock:
            if get_current_worker().is_cancelled:  # the cursor moved on before it was its turn
                return
            try:
                rendered = self._renderer.render(item.detail, width)
            except Exception as exc:  # a bug in a view: show it in the pane, keep browsing
                message = f"tcx: internal error rendering this item ({type(exc).__name__}: {exc}). {INTERNAL}"
                rendered = Rendered(Text(clean(message)), None)
        self.call_from_thread(self._rendered_one, key, width, rendered)

    def _rendered_one(self, key: str, width: int, rendered: Rendered) -> None:
        self._rendered[(key, width)] = rendered
        while len(self._rendered) > CACHE_SIZE:
            self._rendered.popitem(last=False)
        if key == self.current:
            self._show_rendered(rendered)

    def _show_rendered(self, rendered: Rendered) -> None:
        text = rendered.text
        line = rendered.anchor_line
        if line is not None:
            text = text.copy()
            lines = text.plain.split("\n")
            start = sum(len(ln) + 1 for ln in lines[:line])
            text.stylize("reverse", start, start + len(lines[line]))
        self._set_detail(text)
        scroll = self.query_one("#scroll", VerticalScroll)
        self.call_after_refresh(scroll.scroll_to, 0, max(0, (line or 0) - 3), animate=False)

    def _set_detail(self, text: Text) -> None:
        self.detail = text
        self.query_one("#detail", Static).update(text)

    def detail_text(self) -> str:
        """What the detail pane shows now, as plain text."""
        return self.detail.plain

    # ------------------------------------------------------------------ actions

    def status(self, message: str) -> None:
        self.query_one("#status", Static).update(Text(clean(message)))

    def action_jump(self, kind: str, backwards: bool = False) -> None:
        if self.index is None:
            return
        keys = self.index.of_kind(kind)
        target = self.index.next_of(keys, self.current, backwards)
        if target is None:
            self.status(f"no {KIND_NAMES[kind]}s in this run")
            return
        self.goto(target)
        self.status(f"{KIND_NAMES[kind]} {keys.index(target) + 1} of {len(keys)}")

    def action_follow(self, number: int) -> None:
        if self.index is None or self.current is None:
            return
        links = self.index.items[self.current].links
        if number > min(len(links), MAX_LINKS):
            self.status(f"this item has no link {number}" if links else "this item links nowhere")
            return
        link = links[number - 1]
        self.goto(link.target)
        self.status(f"followed: {link.label}")

    def action_back(self) -> None:
        if not self._history:
            self.status("nothing to go back to")
            return
        self.goto(self._history.pop(), remember=False)

    def action_search(self) -> None:
        box = self.query_one("#search", Input)
        if box.display:  # typing the query: a "/" is part of it
            raise SkipAction()
        box.display = True
        box.value = self._query
        self.set_focus(box)  # now, not after the next refresh: the keys typed next are the query

    def on_input_submitted(self, event: Input.Submitted) -> None:
        self._close_search()
        if self.index is None:
            return
        self._query = event.value.strip()
        self._matches = self.index.matches(self._query)
        if not self._matches:
            self.status(f"no match for {self._query!r}")
            return
        self.action_next_match()

    def on_key(self, event: Any) -> None:
        if event.key == "escape" and self.query_one("#search", Input).display:
            self._close_search()
            event.stop()

    def _close_search(self) -> None:
        self.query_one("#search", Input).display = False
        self.set_focus(self.tree_widget)

    def action_next_match(self, backwards: bool = False) -> None:
        if self.index is None or not self._matches:
            self.status("no search yet: press / to search")
            return
        target = self.index.next_of(self._matches, self.current, backwards)
        assert target is not None
        self.goto(target)
        n = self._matches.index(target) + 1
        self.status(
            f"match {n} of {len(self._matches)} for {self._query!r}: {self.index.items[target].label}"
        )


def _links_text(item: Item) -> Text:
    text = Text(clean(item.label), style="bold")
    for i, link in enumerate(item.links[:MAX_LINKS], 1):
        text.append(f"\n {i} → ", style="bold")
        text.append(clean(link.label))
    if len(item.links) > MAX_LINKS:
        text.append(f"\n   (+{len(item.links) - MAX_LINKS} more below this item in the tree)", style="dim")
    return text


def _summary(index: Index) -> str:
    counts = {kind: len(index.of_kind(kind)) for kind in KIND_NAMES}
    return (
        f"{counts['break']} graph breaks · {counts['kernel']} kernels · {counts['guard']} guards — "
        "/ search · b k g jump · 1-9 follow a link · backspace back · tab detail · q quit"
    )
