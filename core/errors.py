"""Errors tcx reports to the user, each with its documented exit code.

The CLI turns a `TcxError` into one paragraph on stderr and exits with `exit_code`;
anything else escaping is a tcx bug and exits with `EXIT_INTERNAL`.
"""

from __future__ import annotations

import zlib

EXIT_OK = 0
EXIT_BUDGET = 1  # `tcx check`: a budget was exceeded
EXIT_USAGE = 2  # bad command line, missing file/function, bad --call spec
EXIT_TARGET = 3  # the program raised, exited non-zero, crashed or timed out
EXIT_INPUT = 4  # a recording or trace log that cannot be read
EXIT_INTERNAL = 5  # a bug in tcx itself


# What reading an input can raise besides tcx's own errors: the OS's (a file that vanished after
# it was listed, a name longer than the OS allows, a permission) and a broken gzip's (EOFError
# when cut short; gzip.BadGzipFile, an OSError, for a bad header or CRC; zlib.error for a bad
# deflate stream). Every reader catches exactly these and reports them with the input's exit code.
READ_ERRORS: tuple[type[BaseException], ...] = (OSError, EOFError, zlib.error)


class TcxError(Exception):
    """An error with a message meant for the user and an exit code."""

    exit_code = EXIT_INTERNAL

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(TcxError):
    exit_code = EXIT_USAGE


class InputError(TcxError):
    """A recording or log file that is missing, foreign, corrupt or from a newer tcx."""

    exit_code = EXIT_INPUT
