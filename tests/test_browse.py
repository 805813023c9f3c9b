"""`tcx browse`: the tree and its links (tui/index.py), the app driven by textual's Pilot, and the
real command in a real terminal (tmux): keys in, screen out, the terminal restored on `q`.

The kernel tests read tests/data/recordings/tiny.tcx.gz (Inductor, every capture: one break, one
recompile, four kernels); the break and recompile tests the session's eager recording of
fixtures/programs/demo.py (three breaks in a chain, recompiles on a shape and a Python value).
"""

from __future__ import annotations

import asyncio
import html
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from conftest import REPO, run_tcx, tool

from tcx.cli.session import load
from tcx.core.errors import EXIT_OK, EXIT_USAGE
from tcx.core.selection import whole_run
from tcx.tui.app import BrowseApp
from tcx.tui.index import build_index

TINY = REPO / "tests" / "data" / "recordings" / "tiny.tcx.gz"


def _app(path: Path, *, color: bool = True) -> BrowseApp:
    loaded = load(str(path))
    return BrowseApp(loaded.model, whole_run(loaded.model), color=color)


def _drive(
    app: BrowseApp, scenario: Callable[[BrowseApp, Callable[..., Awaitable[None]]], Awaitable[None]]
) -> None:
    """Run `scenario(app, press)` in a headless 150x45 terminal; `press` sends keys and waits
    until the app has rendered what they asked for."""

    async def main() -> None:
        async with app.run_test(size=(150, 45)) as pilot:

            async def settle() -> None:
                for _ in range(100):
                    await pilot.pause(0.02)
                    await app.workers.wait_for_complete()
                    await pilot.pause()
                    if app.index is not None and "rendering…" not in app.detail_text():
                        return
                raise AssertionError("the app did not settle")

            async def press(*keys: str) -> None:
                for key in keys:
                    await pilot.press(key)
                    await settle()

            await settle()
            await scenario(app, press)

    asyncio.run(main())


def screen(app: BrowseApp) -> str:
    """Every character on the screen now, row after row (from textual's own SVG screenshot)."""
    svg = app.export_screenshot()
    return html.unescape("".join(re.findall(r"<text[^>]*>(.*?)</text>", svg))).replace("\xa0", " ")


def cursor(app: BrowseApp) -> str | None:
    node = app.tree_widget.cursor_node
    return node.data if node else None


# --------------------------------------------------------------------------- the tree and its links


def test_index_links_each_break_to_the_compile_that_resumed_it_and_each_recompile_to_its_guard():
    loaded = load(str(TINY))
    index = build_index(loaded.model, whole_run(loaded.model))
    items = index.items
    # 0/0 (float32) breaks at the print and resumes in 1/0; its recompile 0/1 (float64) resumes
    # in the resume function's own recompile 1/1, not in 1/0.
    assert items["compile 0/0/breaks/0"].links[0].target == "compile 1/0"
    assert items["compile 0/1/breaks/0"].links[0].target == "compile 1/1"
    assert [items[k].label.split(" at ")[0] for k in index.of_kind("break")] == [
        "Failed to trace builtin operator"
    ] * 2
    recompile = items["compile 0/1/recompile"]
    assert recompile.label == "recompile: dtype change"
    failing, entry = recompile.links
    assert items[failing.target].label == "TENSOR_MATCH L['x']"
    assert items[failing.target].parent == "compile 0/0/guards"  # the guard of the entry that failed
    assert entry.target == "compile 0/0" and "had served" in entry.label
    kernel = items["compile 1/0/kernels/inference/cpp_fused_cos_mul_0"]
    # the recording keeps the absolute path it was made at; it is shown relative to the cwd
    labels = [link.label for link in kernel.links]
    assert labels[:2] == ["ATen aten.mul.Tensor", "ATen aten.cos.default"]
    assert re.fullmatch(r"line \S*tests/data/recordings/tiny\.py:13  return y\.cos\(\) \* 2", labels[2])
    assert items[kernel.links[2].target].detail.line == 13
    assert index.matches("COS_MUL") == [
        "compile 1/0/kernels/inference/cpp_fused_cos_mul_0",
        "compile 1/1/kernels/inference/cpp_fused_cos_mul_0",
    ]
    assert len(index.of_kind("guard")) == 34  # 9 + 9 + 8 + 8, torch's guard_count per entry


# --------------------------------------------------------------------------- the app, driven by Pilot


@pytest.mark.torch
def test_pilot_follows_a_break_to_its_resume_compile_and_a_recompile_to_its_guard(dynamo_recorded):
    app = _app(dynamo_recorded("demo.py").recording)

    async def scenario(app: BrowseApp, press: Callable[..., Awaitable[None]]) -> None:
        await press("b")
        assert cursor(app) == "compile 0/0/breaks/0"
        shown = screen(app)
        assert "Data-dependent branching at fixtures/programs/demo.py:13" in shown
        assert "1 → resumes in compile 1/0" in shown
        assert "graph break 1 of 5" in shown
        await press("b", "b", "b", "b")  # 0/1, 1/0, 2/0, then 2/1: the break of the 256-row call
        assert cursor(app) == "compile 2/1/breaks/0"
        assert "execution resumes in compile 3/2" in app.detail_text()
        await press("1")
        assert cursor(app) == "compile 3/2"
        shown = screen(app)
        assert "followed: resumes in compile 3/2" in shown
        assert "3/2  g (resumed after line 16)" in shown
        await press("backspace")
        assert cursor(app) == "compile 2/1/breaks/0"
        # a recompile: its failing guard, then the entry that had served the calls
        await press("b")  # past the last break: back to the first
        assert cursor(app) == "compile 0/0/breaks/0"
        await press("slash", *"specialization", "enter")
        assert cursor(app) == "compile 0/1/recompile"
        shown = screen(app)
        assert "1 → failing guard of entry 0/0: tensor 'x' size mismatch at index 0." in shown
        assert "2 → entry 0/0, which had served the calls before" in shown
        await press("1")
        guard = app.index.items[cursor(app)]
        assert guard.label == "TENSOR_MATCH L['x']" and guard.parent == "compile 0/0/guards"
        marked = app.detail
        highlighted = [marked.plain[s.start : s.end] for s in marked.spans if str(s.style) == "reverse"]
        # the guards view shows the source as the user named it (x, not L['x'])
        assert len(highlighted) == 1 and re.match(r"\s*TENSOR_MATCH\s+x\s", highlighted[0]), highlighted
        assert "size=[128, 32]" in highlighted[0]
        await press("backspace", "2")
        assert cursor(app) == "compile 0/0"

    _drive(app, scenario)


def test_pilot_searches_a_kernel_and_opens_its_user_line():
    app = _app(TINY)

    async def scenario(app: BrowseApp, press: Callable[..., Awaitable[None]]) -> None:
        assert "34 guards" in screen(app)
        await press("k")
        assert cursor(app) == "compile 0/0/kernels/inference/cpp_fused_add_sin_0"
        await press("slash", *"cos_mul", "enter")
        assert cursor(app) == "compile 1/0/kernels/inference/cpp_fused_cos_mul_0"
        shown = screen(app)
        assert "match 1 of 2 for 'cos_mul'" in shown
        assert "kernel cpp_fused_cos_mul_0  cpp · C++ loop · fuses cos, mul" in shown  # codegen's renderer
        assert "2 → ATen aten.cos.default" in shown
        await press("n")
        assert cursor(app) == "compile 1/1/kernels/inference/cpp_fused_cos_mul_0"
        await press("2")  # the ATen op: the inference graph, the op's line marked
        assert cursor(app) == "compile 1/1/kernels/inference/cpp_fused_cos_mul_0/op/aten.cos.default"
        assert "torch.ops.aten.cos.default" in screen(app)
        await press("backspace", "3")  # the user line: the recording's copy of tiny.py, line 13 marked
        detail = app.detail_text()
        assert re.match(r"source \S*tests/data/recordings/tiny\.py:13\n", detail)
        assert re.search(r"❱ 13 +return y\.cos\(\) \* 2", detail)
        await press("g")  # no guard after the last kernel: back to the first one
        assert cursor(app) == "compile 0/0/guards/0"
        assert "guard 1 of 34" in screen(app)

    _drive(app, scenario)


def test_pilot_without_colour_the_detail_has_no_colour(monkeypatch):
    def colours(app: BrowseApp) -> set[str]:
        text = app.detail
        return {str(s.style) for s in text.spans if getattr(s.style, "color", None) is not None}

    seen: dict[bool, set[str]] = {}
    for color in (True, False):
        if not color:
            monkeypatch.setenv("NO_COLOR", "1")

        async def scenario(
            app: BrowseApp, press: Callable[..., Awaitable[None]], color: bool = color
        ) -> None:
            await press("b")
            seen[color] = colours(app)
            assert app.no_color is (not color)

        _drive(_app(TINY, color=color), scenario)
    assert seen[True] and not seen[False]


# --------------------------------------------------------------------------- the command


def test_browse_without_textual_says_how_to_install_it():
    code = (
        "import sys\n"
        "sys.modules['textual'] = None\n"  # as if textual were not installed
        "from tcx.cli.main import main\n"
        f"main(['browse', {str(TINY)!r}])\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == EXIT_USAGE, proc.stderr
    assert "needs textual" in proc.stderr and "pip install tcx[browse]" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_help_does_not_import_textual():
    code = (
        "import sys\n"
        "from tcx.cli.main import main\n"
        "try:\n"
        "    main(['--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "assert 'textual' not in sys.modules, 'textual imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "browse" in proc.stdout


def test_browse_without_a_terminal_is_a_usage_error():
    proc = run_tcx("browse", str(TINY))  # stdin and stdout are pipes
    assert proc.returncode == EXIT_USAGE
    assert "needs a terminal" in proc.stderr and "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- a real terminal: tmux

SGR = re.compile(r"\x1b\[([0-9;]*)m")
COLOUR_PARAMS = {*range(30, 39), *range(40, 49), *range(90, 98), *range(100, 108)}


class Tmux:
    """One tmux server of our own (its own socket) running a plain bash in a 120x35 terminal."""

    def __init__(self, socket: Path) -> None:
        self.socket = socket
        self("new-session", "-d", "-x", "120", "-y", "35", "bash --norc --noprofile")

    def __call__(self, *args: str) -> str:
        return subprocess.run(
            ["tmux", "-S", str(self.socket), *args], capture_output=True, text=True, timeout=30, check=True
        ).stdout

    def screen(self, escapes: bool = False) -> str:
        return self("capture-pane", "-p", *(["-e"] if escapes else []))

    def wait_for(self, text: str, timeout: float = 30) -> str:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            shown = self.screen()
            if text in shown:
                return shown
            time.sleep(0.2)
        raise AssertionError(f"{text!r} never appeared on the screen:\n{self.screen()}")

    def kill(self) -> None:
        subprocess.run(["tmux", "-S", str(self.socket), "kill-server"], capture_output=True, timeout=30)


@pytest.mark.parametrize("no_color", [False, True], ids=["colour", "NO_COLOR"])
def test_tmux_browse_a_recording_then_quit_restores_the_terminal(tmp_path, no_color):
    tool("tmux", "a terminal multiplexer: Debian's tmux")
    tmux = Tmux(tmp_path / "tmux.sock")
    try:
        env = "NO_COLOR=1 " if no_color else ""
        command = f"{env}{shlex.quote(sys.executable)} -m tcx browse {shlex.quote(str(TINY))}"
        tmux(
            "send-keys",
            f"cd {shlex.quote(str(REPO))}; clear; echo BEFORE-BROWSE; {command}; echo EXIT=$?",
            "Enter",
        )
        tmux.wait_for("2 graph breaks · 4 kernels · 34 guards")
        assert tmux("display", "-p", "#{alternate_on}").strip() == "1"
        tmux("send-keys", "b")
        tmux.wait_for("graph break 1 of 2")
        tmux("send-keys", "1")
        tmux.wait_for("followed: resumes in compile 1/0")
        tmux("send-keys", "-l", "/cos_mul")  # one write, as fast as a paste: the query goes to the search box
        tmux("send-keys", "Enter")
        tmux.wait_for("match 1 of 2 for 'cos_mul'")
        tmux.wait_for("kernel cpp_fused_cos_mul_0  cpp · C++ loop")  # codegen's renderer
        if no_color:
            params = {int(p) for m in SGR.findall(tmux.screen(escapes=True)) for p in m.split(";") if p}
            assert not params & COLOUR_PARAMS, sorted(params & COLOUR_PARAMS)
        tmux("send-keys", "q")
        after = tmux.wait_for("EXIT=")
        # back on the shell's own screen, as it was: no app left on it, the exit code of a clean run
        assert tmux("display", "-p", "#{alternate_on}").strip() == "0"
        assert "BEFORE-BROWSE" in after and f"EXIT={EXIT_OK}" in after
        assert "cpp_fused" not in after and "graph break" not in after
        assert tmux("display", "-p", "#{cursor_flag} #{mouse_any_flag}").split() == ["1", "0"]
    finally:
        tmux.kill()
