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
- `Wrapped` is text inside a layout (a table cell, a padded block) or a line that must fit the
  width: it wraps with CONTINUATION wherever it is printed, a pipe included, and is never cut.
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
from rich.measure import Measurement
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from tcx.renderers.safe import SafeConsole, clean

CONTINUATION = "↪ "
FOLD_ROWS = 12  # the HTML report folds a titled list of rows longer than this
WRAPPED_MIN_WIDTH = 12  # a table may narrow a Wrapped cell down to this many cells
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

    def __init__(self, *args: object, nonce: str, whole_lines: bool = False, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.nonce = nonce
        self.folds: list[Fold] = []
        # HTML: rows and never-cut lines are printed whole, and the browser wraps them (no CONTINUATION)
        self.whole_lines = whole_lines

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
        if not colored(console):
            yield from _emit(console, options, self.text.split("\n"), self.indent)
        else:
            yield from _emit(console, options, highlighted(self.text, self.lexer), self.indent)


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


def _whole_lines(console: Console) -> bool:
    return isinstance(console, FoldingConsole) and console.whole_lines


def colored(console: Console) -> bool:
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
    wrap_at = options.max_width - indent if console.is_terminal and not _whole_lines(console) else None
    if wrap_at is None and not colored(console):  # a pipe or a file: one piece of text
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


def highlighted(text: str, lexer: str) -> list[Text]:
    from rich.syntax import Syntax

    syntax = Syntax(text, lexer, theme="ansi_dark", background_color="default")
    return list(syntax.highlight(text).split("\n", allow_blank=True))[: text.count("\n") + 1]


def _wrap(line: Text, width: int) -> list[Text]:
    """`line` cut into pieces that fit `width` cells; every piece after the first has CONTINUATION
    in front of it, so it gets that many cells less."""
    return [piece for piece, _ in pieces(line, width, at_spaces=False, mark_all=True)]


def pieces(
    line: Text, width: int, *, at_spaces: bool, mark_all: bool, hang: int = 0
) -> list[tuple[Text, bool]]:
    """`line` in pieces that fit `width` cells, each with whether it starts with CONTINUATION.

    `at_spaces`: a piece ends after the last space that leaves it at least half full (else in the
    middle of a word). Every piece after the first is indented by `hang` cells, and a marked one
    gets the continuation's cells less. `mark_all`: every piece after the first is marked;
    otherwise (prose) only one that goes on in the middle of a word."""
    from rich.cells import cell_len

    plain = line.plain
    if cell_len(plain) <= width:
        return [(line, False)]
    hang = min(hang, width // 2)
    bounds: list[tuple[int, int, bool]] = []  # (start, end, marked)
    start, marked, n = 0, False, len(plain)
    while start < n:
        limit = width if not bounds else width - hang - (cell_len(CONTINUATION) if marked else 0)
        limit = max(limit, 1)
        end, used = start, 0
        while end < n and used + cell_len(plain[end]) <= limit:
            used += cell_len(plain[end])
            end += 1
        end = max(end, start + 1)  # a character wider than the limit still goes somewhere
        mid_word = end < n
        after = end
        if mid_word and at_spaces:
            if plain[end] == " ":  # the piece ends with a word: the space goes with the break
                mid_word, after = False, end + 1
            else:
                space = plain.rfind(" ", start, end)
                if space >= start + (end - start) // 2:
                    end, after, mid_word = space + 1, space + 1, False
        bounds.append((start, end, marked))
        start, marked = after, mark_all or mid_word
    # One divide for all pieces: slicing a Text divides the whole line each time.
    cuts = sorted({x for a, b, _ in bounds for x in (a, b)} - {0, n})
    at = dict(zip([0, *cuts], line.divide(cuts), strict=True))
    return [(at[a], m) for a, _, m in bounds]


class Wrapped:
    """Text that is never cut (a guard, a stack, a fix, a table cell): a line wider than the room it
    gets wraps, after a space where one is near its end, and a continuation starts with CONTINUATION,
    on a terminal and in a pipe alike. `prose`: only a continuation in the middle of a word is
    marked (prose wrapped at spaces reads as prose). `hang`: continuations are indented this much
    (under a column of the first line)."""

    def __init__(self, text: Text | str, *, prose: bool = False, style: str = "", hang: int = 0) -> None:
        self.text = Text(clean(text), style=style) if isinstance(text, str) else text
        self.prose = prose
        self.hang = hang

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        from rich.cells import cell_len

        longest = max((cell_len(ln) for ln in self.text.plain.split("\n")), default=0)
        return Measurement(min(longest, WRAPPED_MIN_WIDTH), longest)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        mark_all = not self.prose
        if _whole_lines(console):
            for line in self.text.split("\n", allow_blank=True):
                yield from line.render(console, end="")
                yield Segment.line()
            return
        for line in self.text.split("\n", allow_blank=True):
            parts = pieces(line, options.max_width, at_spaces=True, mark_all=mark_all, hang=self.hang)
            for i, (piece, marked) in enumerate(parts):
                if i and self.hang:
                    yield Segment(" " * min(self.hang, options.max_width // 2))
                if marked:
                    yield Segment(CONTINUATION, _MUTED)
                yield from piece.render(console, end="")
                yield Segment.line()


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
