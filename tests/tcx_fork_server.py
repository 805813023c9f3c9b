"""The suite's tcx starter, run as a script by tests/tcx_fork.py: `python tcx_fork_server.py REPO FD`.

It imports tcx's command line, core, renderers and terminal UI once (never torch: that stays each
program's and command's own business), then serves requests on the Unix socket FD (SOCK_SEQPACKET,
a message each): each request is one `python -m tcx ARGS` run from REPO, made as a fork of this
process that takes the request's environment, and its stdout and stderr (pipes passed with the
request), and runs `tcx` as `-m` would. This process waits for the fork and sends its exit status
back. It exits when the socket closes.

A fork shares with this process what it imported: modules that read nothing from the environment
at import (tcx, rich and click read it when a command runs; tests/test_tcx_fork.py holds a fork's
output equal to a fresh process's). A request whose environment differs in what Python reads at
start-up is never sent here (tests/tcx_fork.py).
"""

import sys

REPO, FD = sys.argv[1], int(sys.argv[2])
sys.path[0] = REPO  # where `python -m tcx`, started in REPO, finds tcx first

import gc  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import pkgutil  # noqa: E402
import runpy  # noqa: E402
import socket  # noqa: E402

# Modules that import torch: the recorder (it runs in the program's process) and the numerics
# comparison (`tcx numerics` compares tensors in its own process). A command imports them itself.
SKIPPED = (
    "tcx.core.recorder",
    "tcx.core.numerics.compare",
    "tcx.core.numerics.judge",
    "tcx.core.numerics.pipeline",
)


def preimport() -> None:
    import tcx

    del tcx
    for sub in ("cli", "core", "renderers", "tui"):
        package = importlib.import_module(f"tcx.{sub}")
        for info in pkgutil.walk_packages(package.__path__, f"tcx.{sub}."):
            if not info.name.startswith(SKIPPED):
                importlib.import_module(info.name)
    if "torch" in sys.modules:
        raise SystemExit("a tcx module imported torch at import")


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


def main() -> None:
    conn = socket.socket(fileno=FD)
    preimport()
    gc.collect()
    gc.freeze()  # a fork's collections then leave the imported modules' pages unshared
    conn.send(b"ready")
    request = serve(conn)
    if request is None:
        sys.exit(0)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    sys.argv = ["-m", *request["args"]]  # runpy puts tcx/__main__.py first, as -m does
    runpy.run_module("tcx", run_name="__main__", alter_sys=True)


main()
