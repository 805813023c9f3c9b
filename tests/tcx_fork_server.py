"""The suite's starter, run as a script by tests/tcx_fork.py: `python tcx_fork_server.py REPO FD [python]`.

`tcx` (the default): it imports tcx's command line, core, renderers and terminal UI once (never
torch: that stays each program's and command's own business) and serves `python -m tcx ARGS` runs
from REPO. `python`: it imports torch, Dynamo and Inductor once (nothing of tcx) and serves plain
`python PROGRAM ARGS` and `python -c CODE ARGS` runs: the programs the suite runs with no tcx
anywhere, to compare tcx's counts with torch's own log of the program.

Requests come on the Unix socket FD (SOCK_SEQPACKET, a message each); each is made as a fork of
this process that takes the request's environment and folder, and its stdout and stderr (pipes
passed with the request). This process waits for the fork and sends its exit status back. It exits
when the socket closes.

A fork shares with this process what it imported: modules that read nothing from the environment
at import that the request may change (tcx, rich and click read it when a command runs; torch
reads TORCH_TRACE at import, read again here for each program that sets it). tests/tcx_fork.py
sends here only requests whose environment differs in nothing else that is read at start-up or at
import; tests/test_tcx_fork.py holds a fork's output (and torch's log) equal to a fresh process's.
"""

import sys

REPO, FD = sys.argv[1], int(sys.argv[2])
MODE = sys.argv[3] if len(sys.argv) > 3 else "tcx"
sys.path[0] = REPO  # where `python -m tcx`, started in REPO, finds tcx first

import atexit  # noqa: E402
import contextlib  # noqa: E402
import gc  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import pkgutil  # noqa: E402
import runpy  # noqa: E402
import socket  # noqa: E402
import types  # noqa: E402

# Modules that import torch: the recorder (it runs in the program's process) and the numerics
# comparison (`tcx numerics` compares tensors in its own process). A command imports them itself.
SKIPPED = (
    "tcx.core.recorder",
    "tcx.core.numerics.compare",
    "tcx.core.numerics.judge",
    "tcx.core.numerics.pipeline",
)


def preimport_tcx() -> None:
    import tcx

    del tcx
    for sub in ("cli", "core", "renderers", "tui"):
        package = importlib.import_module(f"tcx.{sub}")
        for info in pkgutil.walk_packages(package.__path__, f"tcx.{sub}."):
            if not info.name.startswith(SKIPPED):
                importlib.import_module(info.name)
    if "torch" in sys.modules:
        raise SystemExit("a tcx module imported torch at import")


def preimport_torch() -> None:
    """What a program's first compile imports (as tcx's own warm process does)."""
    import torch  # noqa: F401

    for name in ("torch._dynamo", "torch._inductor.compile_fx"):
        with contextlib.suppress(ImportError):
            importlib.import_module(name)
    if "tcx" in sys.modules:
        raise SystemExit("importing torch imported tcx")


def serve(conn: socket.socket) -> dict | None:
    """Fork one process per request; None here when the socket closes, the request in the fork."""
    while True:
        msg, fds, _, _ = socket.recv_fds(conn, 1 << 20, 2)
        if not msg:
            return None
        request = json.loads(msg)
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            conn.close()
            os.dup2(fds[0], 1)
            os.dup2(fds[1], 2)
            for fd in fds:
                os.close(fd)
            return request
        for fd in fds:
            os.close(fd)
        conn.send(f"pid {pid}".encode())
        _, status = os.waitpid(pid, 0)
        conn.send(f"rc {os.waitstatus_to_exitcode(status)}".encode())


def run_tcx(args: list[str]) -> None:
    sys.argv = ["-m", *args]  # runpy puts tcx/__main__.py first, as -m does
    runpy.run_module("tcx", run_name="__main__", alter_sys=True)


def run_program(args: list[str]) -> None:
    """`python PROGRAM ARGS` or `python -c CODE ARGS`, as Python starts them: sys.argv, sys.path's
    first entry (the program's real folder, or '' for -c), a `__main__` of the program's own, and
    an uncaught exception printed from the program's first frame on, exit status 1."""
    if os.environ.get("TORCH_TRACE"):
        from torch._logging import _internal  # torch made its trace handler at import, without one

        _internal.LOG_TRACE_HANDLER = None
        _internal._init_logs()
    if args[0] == "-c":
        sys.argv = ["-c", *args[2:]]
        sys.path[0] = ""
        main = types.ModuleType("__main__")
        main.__dict__.update(__builtins__=__builtins__, __loader__=None, __spec__=None)
        sys.modules["__main__"] = main
        code, run = compile(args[1], "<string>", "exec"), lambda: exec(code, main.__dict__)
        first = "<string>"
    else:
        sys.argv = list(args)
        sys.path[0] = os.path.dirname(os.path.realpath(args[0]))
        run, first = (lambda: runpy.run_path(args[0], run_name="__main__")), args[0]
    try:
        run()
    except SystemExit:
        raise
    except BaseException as exc:  # as Python prints an uncaught exception: the program's frames only
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename != first:
            tb = tb.tb_next
        sys.excepthook(type(exc), exc, exc.with_traceback(tb).__traceback__)
        sys.exit(1)


def quiet_teardown_in_forks(server: int) -> None:
    """A fork's last exit handler (registered before torch registers its own): what Python prints
    while it tears the fork down goes nowhere. The frozen modules stay out of the collector's sight
    there, and triton's bindings would print the objects still alive as leaks, which a fresh process
    never prints (collecting them instead costs about a CPU-second per program)."""
    if os.getpid() == server:
        return
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    nowhere = os.open(os.devnull, os.O_WRONLY)
    os.dup2(nowhere, 1)
    os.dup2(nowhere, 2)


def main() -> None:
    conn = socket.socket(fileno=FD)
    if MODE == "python":
        atexit.register(quiet_teardown_in_forks, os.getpid())
    preimport_torch() if MODE == "python" else preimport_tcx()
    gc.collect()
    gc.freeze()  # a fork's collections then leave the imported modules' pages unshared
    conn.send(b"ready")
    request = serve(conn)
    if request is None:  # the suite has ended: no finalization (the imported modules are frozen)
        os._exit(0)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    run_program(request["args"]) if MODE == "python" else run_tcx(request["args"])


main()
