"""sitecustomize for the program's child interpreters (copied there by core/recorder/children.py).

Python imports `sitecustomize` at start-up; tcx puts a copy of this file first on the
PYTHONPATH of the program it records, so every Python child process the program starts
runs it. It is inert unless TCX_CHILD_RECORDING is set, and it costs nothing until the
child imports torch: then tcx records the child's compiles into a recording of its own.
When tcx cannot (it is not importable from this interpreter, or installing failed), the
child is written down as not observed, so no report counts it as clean.

Standard library only, and it then runs the sitecustomize it shadows, if there is one.
"""

import importlib.machinery
import importlib.util
import json
import os
import sys

_ENV = "TCX_CHILD_RECORDING"


def _how(argv):
    text = " ".join(argv)
    if "multiprocessing.spawn" in text:
        return "spawn"
    if "multiprocessing.forkserver" in text:
        return "forkserver"
    return "subprocess"


def _not_observed(config, reason):
    path = os.path.join(config["dir"], f"{os.getpid()}.unobserved.json")
    argv = [str(a)[:200] for a in getattr(sys, "orig_argv", sys.argv)[:8]]
    info = {"pid": os.getpid(), "ppid": os.getppid(), "how": _how(argv), "argv": argv, "reason": reason}
    try:
        with open(path, "w", encoding="utf-8", errors="backslashreplace") as fh:
            json.dump(info, fh)
    except OSError:
        pass


def _on_torch(config):
    argv = [str(a) for a in getattr(sys, "orig_argv", sys.argv)]
    try:
        from tcx.core.recorder.children import record_this_process
    except Exception as exc:
        _not_observed(config, f"tcx cannot be imported by {sys.executable} ({type(exc).__name__}: {exc})")
        return
    try:
        record_this_process(config, _how(argv))
    except Exception as exc:
        _not_observed(config, f"tcx could not record this process ({type(exc).__name__}: {exc})")


class _AfterTorchImport:
    """A meta-path finder that runs `_on_torch` once torch has finished importing."""

    def __init__(self, config):
        self.config = config

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torch":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        original = spec.loader.exec_module
        config = self.config

        def exec_module(module):
            original(module)
            _on_torch(config)

        spec.loader.exec_module = exec_module
        return spec


def _install():
    raw = os.environ.get(_ENV)
    if not raw:
        return
    try:
        config = json.loads(raw)
        config["dir"]
    except (ValueError, TypeError, KeyError):
        return
    argv = " ".join(str(a) for a in getattr(sys, "orig_argv", sys.argv))
    if "compile_worker" in argv:  # Inductor's own compile workers compile no frames
        return
    if "torch" in sys.modules:
        _on_torch(config)
    else:
        sys.meta_path.insert(0, _AfterTorchImport(config))


def _chain():
    """Run the sitecustomize this file shadows, and take this file's folder off sys.path."""
    here = os.path.dirname(os.path.abspath(__file__))
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", sys.path)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


_install()
_chain()
