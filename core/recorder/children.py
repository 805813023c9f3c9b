"""Record torch.compile in the program's child processes, each into a recording of its own.

A program may compile in processes it starts: a multiprocessing worker (fork, spawn,
forkserver) or a `python` subprocess. Their compiles are real compiles of the program, so
a CI gate must count them. Each child writes `children/<pid>.tcx` next to the run's
recording; the parent summarizes them (core/run/observed.py) into `child_process` events.

- Forked children inherit the recorder's hooks; `os.register_at_fork` moves the inherited
  writer to the child's own file, so the two processes never write one file.
- Started interpreters run `sitecustomize` (core/recorder/child_site.py, copied into the
  run's directory and put first on PYTHONPATH). When the child imports torch, it records
  the structured trace there (`record_this_process`). A child that imports torch where
  tcx cannot record writes `<pid>.unobserved.json`, which the report counts as not observed.
- An interpreter started so that it never runs that sitecustomize (`python -I`, `-E` or `-S`,
  or an environment without tcx's variables) cannot say so itself: the process that starts it
  writes `launch-<ppid>-<n>.unobserved.json` (an audit hook on `subprocess.Popen` and
  `os.exec*`), and it is not observed either: whatever it compiled, tcx never saw.

Torch-free at import: the compatibility layer is imported only once torch is.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import sys
import threading
import warnings
from pathlib import Path
from typing import IO, Any

from tcx.core.ingest.recording import RecordingWriter, write_header

ENV = "TCX_CHILD_RECORDING"  # JSON: {"dir": ..., "backend": ..., "dynamic": ..., "mode": ...}
SITE_DIR = "site"


class ProcessWriter(RecordingWriter):
    """A RecordingWriter that a forked child moves to a recording of its own."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self._inherited: list[IO[str]] = []

    def move_to(self, path: Path) -> None:
        # Only the forking thread survives a fork: the lock may be held by a thread that no
        # longer exists. The parent's file object is kept (never flushed or closed here).
        self._lock = threading.Lock()
        self._inherited.append(self._fh)
        self._fh = open(path, "a", encoding="utf-8")  # noqa: SIM115 - lives as long as the process


def install(spec: dict[str, Any], writer: ProcessWriter) -> str | None:
    """In the recorder: make the program's child processes record themselves."""
    directory = Path(spec["recording"]).parent / "children"
    try:
        directory.mkdir(exist_ok=True)
        site = Path(spec["recording"]).parent / SITE_DIR
        site.mkdir(exist_ok=True)
        shutil.copyfile(Path(__file__).with_name("child_site.py"), site / "sitecustomize.py")
    except OSError as exc:
        return f"recording child processes is not available ({exc})"
    config = {"dir": str(directory), **{k: spec.get(k) for k in ("backend", "dynamic", "mode")}}
    os.environ[ENV] = json.dumps(config)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))
    _follow_forks(writer, directory)
    _watch_launches(directory)
    return None


def record_this_process(config: dict[str, Any], how: str) -> None:
    """In a started child interpreter, right after it imported torch: record its compiles."""
    from tcx.core.recorder import compat
    from tcx.core.recorder.handlers import TraceHandler

    directory = Path(config["dir"])
    writer = ProcessWriter(_child_recording(directory, how))
    warnings.filterwarnings(
        "ignore", message=".*force disabled by torch.compiler.config.force_disable_caches"
    )
    compat.disable_compile_caches()
    compat.override_compile(
        config.get("backend"),
        config.get("dynamic"),
        config.get("mode"),
        lambda ev: writer.write("compile_call", **ev),
    )
    problem = compat.attach_trace_handler(TraceHandler(writer))
    if problem:
        raise RuntimeError(problem)
    compat.install_compile_hook(lambda cid: writer.write("compile_seen", compile_id=cid))  # lost capture
    _follow_forks(writer, directory)
    _watch_launches(directory)


def _follow_forks(writer: ProcessWriter, directory: Path) -> None:
    def after_fork_in_child() -> None:
        try:
            writer.move_to(_child_recording(directory, "fork"))
        except OSError:
            writer.move_to(Path(os.devnull))  # never write into the parent's recording

    os.register_at_fork(after_in_child=after_fork_in_child)


# Audit events of a new program started by path and argv: (executable, args, cwd, env) and
# (path, args, env). multiprocessing's spawn copies this interpreter's flags, so it is followed.
_LAUNCH_EVENTS = {"subprocess.Popen": (0, 1, 3), "os.exec": (0, 1, 2)}
_PYTHON = re.compile(r"python[\d.]*(?:\.exe)?")
_SKIPS_SITECUSTOMIZE = {
    "I": "-I: an isolated Python ignores PYTHONPATH, where tcx's sitecustomize is",
    "E": "-E: Python ignores PYTHONPATH, where tcx's sitecustomize is",
    "S": "-S: Python skips the site module, which runs tcx's sitecustomize",
}


def _watch_launches(directory: Path) -> None:
    """Write down each Python interpreter the program starts that tcx cannot follow (see above)."""
    launches = itertools.count()

    def hook(event: str, args: tuple[Any, ...]) -> None:
        where = _LAUNCH_EVENTS.get(event)
        if where is None:
            return
        try:
            executable, argv, env = (args[i] for i in where)
            reason = unfollowable([os.fsdecode(a) for a in argv], executable, env)
            if reason:
                info = {"pid": None, "ppid": os.getpid(), "how": "subprocess", "reason": reason}
                info["argv"] = [os.fsdecode(a)[:200] for a in list(argv)[:8]]
                name = f"launch-{os.getpid()}-{next(launches)}.unobserved.json"
                (directory / name).write_text(json.dumps(info), encoding="utf-8", errors="backslashreplace")
        except Exception:  # never break the program's own launch
            return

    sys.addaudithook(hook)


def unfollowable(argv: list[str], executable: Any, env: Any) -> str | None:
    """Why a started program is a Python interpreter that will not run tcx's sitecustomize; None
    when it is not Python, or will."""
    program = os.fsdecode(executable) if executable else (argv[0] if argv else "")
    if not _PYTHON.fullmatch(os.path.basename(program)):
        return None
    flag = _site_flag(argv[1:])
    if flag:
        return (
            f"started with {_SKIPS_SITECUSTOMIZE[flag]}; tcx cannot record it "
            f"(start it without -{flag} to have its compiles counted)"
        )
    if env is not None and ENV not in env and ENV.encode() not in env:
        return (
            "started with an environment that lacks tcx's variables; tcx cannot record it "
            f"(pass os.environ on, or at least {ENV} and PYTHONPATH)"
        )
    return None


def _site_flag(args: list[str]) -> str | None:
    """The first of -I, -E, -S among the interpreter's options (they end at -c, -m, a script)."""
    takes_value = False
    for arg in args:
        if takes_value:
            takes_value = False
            continue
        if arg == "--check-hash-based-pycs":
            takes_value = True
            continue
        if arg.startswith("--") and arg != "--":  # the other long options take no value
            continue
        if not arg.startswith("-") or arg in ("-", "--"):  # the script, stdin, or the end of options
            return None
        for i, ch in enumerate(arg[1:], start=1):
            if ch in _SKIPS_SITECUSTOMIZE:
                return ch
            if ch in "cm":
                return None
            if ch in "WX":  # the rest of the word, or the next word, is its value
                takes_value = i == len(arg) - 1
                break
    return None


def _child_recording(directory: Path, how: str) -> Path:
    path = directory / f"{os.getpid()}.tcx"
    # A forked child runs the program's code: its argv is the program's, not the interpreter's.
    argv = sys.argv if how == "fork" else getattr(sys, "orig_argv", sys.argv)
    write_header(
        path,
        target=f"child process {os.getpid()}",
        child={
            "pid": os.getpid(),
            "ppid": os.getppid(),
            "how": how,
            "argv": [str(a)[:200] for a in argv[:8]],
        },
    )
    return path
