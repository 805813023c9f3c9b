"""Code and rows of data in the terminal (kernels, graphs, PTX, decompiled bytecode, wrapper
steps, guards): cost follows what is shown, and nothing is cut.

- Colour on: highlighted by pygments (rich's Syntax), and only the blocks that are printed.
  Colour off (`--no-color`, `NO_COLOR`, a pipe): no lexer runs at all.
- Not a terminal (a pipe, a file, CI): every line is printed whole, however wide; the block
  goes out as one piece of text (rich does not split it into segments per line).
- A terminal: a line wider than the console wraps, and each continuation starts with
  CONTINUATION, so a cut is always visible.
- `Lines` prints rows of data (wrapper steps, guards, lifetimes, the index) the same way, in one
  call per block: rich's Table and one `print` per row cost milliseconds a row.
- The same source printed again in one view (a kernel repeated across recompiles, identical
  graphs) is shown once; later it is a one-line reference to where it was shown (`Seen`).
- A `FoldingConsole` (the HTML report) gets a placeholder line instead of the code (and of a long
  titled list of rows) and keeps the text aside, so the report can fold it and store each
  distinct text once.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

from rich.console import Console, ConsoleOptions, RenderResult
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from tcx.renderers.safe import SafeConsole, clean

CONTINUATION = "↪ "
FOLD_ROWS = 12  # the HTML report folds a titled list of rows longer than this
_MUTED = Style(dim=True)


def digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()


@dataclass
class Fold:
    """A code block the HTML report folds: its title, text (cleaned) and digest."""

    title: str
    text: str
    digest: str


class FoldingConsole(SafeConsole):
    """A console whose code blocks are kept aside (`folds`) behind a placeholder line each."""

    def __init__(self, *args: object, nonce: str, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.nonce = nonce
        self.folds: list[Fold] = []

    @property
    def placeholder_prefix(self) -> str:
        return f"tcx-fold-{self.nonce}-"

    def placeholder(self, index: int) -> str:
        return f"{self.placeholder_prefix}{index}"


class CodeBlock:
    """One block of code, indented by `indent` columns (see the module docstring)."""

    def __init__(self, text: str, lexer: str, *, indent: int = 4, title: str = "") -> None:
        self.text = clean(text[:-1] if text.endswith("\n") else text)
        self.lexer = lexer
        self.indent = indent
        self.title = title or f"{lexer} code"

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        pad = " " * self.indent
        if isinstance(console, FoldingConsole):
            n_lines = self.text.count("\n") + 1
            console.folds.append(Fold(f"{self.title} ({n_lines} lines)", self.text, digest(self.text)))
            yield Segment(pad + console.placeholder(len(console.folds) - 1) + "\n")
            return
        if not _colored(console):
            yield from _emit(console, options, self.text.split("\n"), self.indent)
        else:
            yield from _emit(console, options, _highlighted(self.text, self.lexer), self.indent)


class Lines:
    """Rows of text (tables of steps, guards, lifetimes: data, not prose) printed like code: whole
    when the output is not a terminal, wrapped with CONTINUATION on one. Much cheaper than rich's
    Table or one `print` per row."""

    def __init__(self, lines: Sequence[Text | str], indent: int = 0, title: str = "") -> None:
        self.lines = lines
        self.indent = indent
        self.title = title

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        lines = _split(self.lines)
        if isinstance(console, FoldingConsole) and self.title and len(lines) > FOLD_ROWS:
            yield from CodeBlock(
                "\n".join(ln if isinstance(ln, str) else ln.plain for ln in lines),
                "text",
                indent=self.indent,
                title=self.title,
            ).__rich_console__(console, options)
            return
        yield from _emit(console, options, lines, self.indent)


def _colored(console: Console) -> bool:
    return console.color_system is not None and not console.no_color


def _split(lines: Sequence[Text | str]) -> list[Text | str]:
    """One entry per printed line (an entry may hold several)."""
    out: list[Text | str] = []
    for line in lines:
        text = line if isinstance(line, str) else line.plain
        if "\n" not in text:
            out.append(line)
        elif isinstance(line, str):
            out.extend(line.split("\n"))
        else:
            out.extend(line.split("\n", allow_blank=True))
    return out


def _emit(
    console: Console, options: ConsoleOptions, lines: Sequence[Text | str], indent: int
) -> Iterator[Segment]:
    pad = " " * indent
    wrap_at = options.max_width - indent if console.is_terminal else None
    if wrap_at is None and not _colored(console):  # a pipe or a file: one piece of text
        yield Segment("".join(pad + (ln if isinstance(ln, str) else ln.plain) + "\n" for ln in lines))
        return
    for line in lines:
        text = Text(line) if isinstance(line, str) else line
        pieces = _wrap(text, wrap_at) if wrap_at is not None else [text]
        for i, piece in enumerate(pieces):
            yield Segment(pad)
            if i:
                yield Segment(CONTINUATION, _MUTED)
            yield from piece.render(console, end="")
            yield Segment.line()


def _highlighted(text: str, lexer: str) -> list[Text]:
    from rich.syntax import Syntax

    syntax = Syntax(text, lexer, theme="ansi_dark", background_color="default")
    return list(syntax.highlight(text).split("\n", allow_blank=True))[: text.count("\n") + 1]


def _wrap(line: Text, width: int) -> list[Text]:
    """`line` cut into pieces that fit `width` cells; every piece after the first has CONTINUATION
    in front of it, so it gets that many cells less."""
    from rich.cells import cell_len

    if cell_len(line.plain) <= width:
        return [line]
    first, rest = max(width, 1), max(width - cell_len(CONTINUATION), 1)
    offsets: list[int] = []
    used, limit = 0, first
    for i, ch in enumerate(line.plain):
        w = cell_len(ch)
        if used + w > limit and used:
            offsets.append(i)
            used, limit = 0, rest
        used += w
    return list(line.divide(offsets))


def print_code(console: Console, text: str, lexer: str, *, indent: int = 4, title: str = "") -> None:
    """Print a code block; the block manages its own width (rich must not crop it)."""
    console.print(CodeBlock(text, lexer, indent=indent, title=title), crop=False)


def print_lines(console: Console, lines: Sequence[Text | str], indent: int = 0, title: str = "") -> None:
    """Print rows of data at once (see `Lines`); with a `title`, the HTML report folds a long list."""
    if lines:
        console.print(Lines(lines, indent, title), crop=False)


@dataclass
class Seen:
    """Sources already printed in one view, by digest: print each distinct source once."""

    where: dict[str, str] = field(default_factory=dict)

    def first(self, text: str, label: str) -> str | None:
        """None the first time `text` is seen (remembering `label`); then the first one's label."""
        key = digest(text)
        if key in self.where:
            return self.where[key]
        self.where[key] = label
        return None


def reference(console: Console, label: str, indent: int = 4) -> None:
    """The line printed in place of a source already shown."""
    console.print(Text(" " * indent + f"(same source as {clean(label)}, shown above)", style="muted"))
