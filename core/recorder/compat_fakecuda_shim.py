"""Compatibility layer (torch-free): a C++ stand-in for the CUDA device, for the CUDA preview.

The CUDA preview runs the program on fake CUDA tensors. Autograd needs two things from the
CUDA device that no Python patch can give: a device guard (`InputMetadata` asks it for the
tensor's stream) and, on a CPU-only build of torch, CUDA as "the accelerator" (the autograd
engine syncs streams through `at::accelerator`). A tiny shared library provides both:

- `tcx_swap_cuda_guard`: puts c10's own `FakeGuardImpl<CUDA>` (no device calls; events are
  no-ops) in the device-guard registry for CUDA, and returns the one it replaced;
- a `CUDAHooks` whose `isBuilt()` is true and which says every device has a primary context
  (the engine asks before it stashes streams; the real hooks of a CUDA build answer "no
  device"). It is registered under torch's own registry key with the preferred priority,
  before torch loads (the CUDA build's own registration is then skipped, with a note on
  stderr), so the recorder child calls `preload()` before it imports torch.

It is compiled once per torch installation with the system's C++ compiler and cached
(~/.cache/tcx or $XDG_CACHE_HOME/tcx). Nothing here imports torch in this process.
"""

from __future__ import annotations

import ctypes
import glob
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

SOURCE = r"""
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/core/impl/FakeGuardImpl.h>
#include <ATen/detail/CUDAHooksInterface.h>
static long tcx_cudnn_version = 91900;
struct TcxPreviewCUDAHooks final : public at::CUDAHooksInterface {
  explicit TcxPreviewCUDAHooks(at::CUDAHooksArgs) {}
  bool isBuilt() const override { return true; }
  bool hasPrimaryContext(c10::DeviceIndex) const override { return true; }
  // what convolution's backend choice (and so its output layout) asks at compile time
  bool compiledWithCuDNN() const override { return tcx_cudnn_version > 0; }
  bool supportsDilatedConvolutionWithCuDNN() const override { return tcx_cudnn_version > 0; }
  bool supportsDepthwiseConvolutionWithCuDNN() const override { return tcx_cudnn_version > 0; }
  bool supportsBFloat16ConvolutionWithCuDNNv8() const override { return tcx_cudnn_version > 0; }
  long versionCuDNN() const override { return tcx_cudnn_version; }
  long versionRuntimeCuDNN() const override { return tcx_cudnn_version; }
  double batchnormMinEpsilonCuDNN() const override { return 1e-5; }
};
extern "C" void tcx_set_cudnn_version(long version) { tcx_cudnn_version = version; }
namespace at {
C10_REGISTER_TYPED_CLASS_WITH_PRIORITY(
    CUDAHooksRegistry, "CUDAHooks", c10::REGISTRY_PREFERRED, TcxPreviewCUDAHooks);
}
static c10::impl::FakeGuardImpl<c10::DeviceType::CUDA> tcx_fake_cuda_guard;
extern "C" const void* tcx_swap_cuda_guard(const void* impl) {
  auto& slot = c10::impl::device_guard_impl_registry[static_cast<size_t>(c10::DeviceType::CUDA)];
  const c10::impl::DeviceGuardImplInterface* next = impl
      ? static_cast<const c10::impl::DeviceGuardImplInterface*>(impl) : &tcx_fake_cuda_guard;
  return slot.exchange(next);
}
"""

# What the subprocess prints about the torch to build against (it imports torch; we do not).
_PROBE = (
    "import json, os, torch, torch.utils.cpp_extension as ce;"
    "print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda,"
    " 'hip': torch.version.hip, 'abi': int(torch._C._GLIBCXX_USE_CXX11_ABI),"
    " 'include': ce.include_paths(), 'lib': os.path.join(os.path.dirname(torch.__file__), 'lib')}))"
)

_LIB: ctypes.CDLL | None = None
_ERROR: str | None = None


def wanted(captures: list[str]) -> bool:
    return any(c.split("=")[0] == "cuda_preview" for c in captures)


def preload(captures: list[str]) -> None:
    """Build and load the shim when the run asks for the CUDA preview; call before `import torch`."""
    global _LIB, _ERROR
    if not wanted(captures) or _LIB is not None:
        return
    try:
        _LIB = _load()
    except Exception as exc:  # the preview reports it; the program still runs
        _ERROR = f"{type(exc).__name__}: {exc}"


def library() -> tuple[ctypes.CDLL | None, str | None]:
    """(the loaded shim, None) or (None, why the preview cannot stand in for the CUDA device)."""
    if _LIB is None and _ERROR is None:
        return None, "the CUDA device stand-in was not loaded before torch (internal error)"
    return _LIB, (
        None
        if _LIB is not None
        else f"the CUDA preview needs a C++ compiler to stand in for the CUDA device ({_ERROR})"
    )


def _load() -> ctypes.CDLL:
    torch_dir = _torch_dir()
    lib_dir = os.path.join(torch_dir, "lib")
    built = _build(torch_dir)
    for name in ("libc10", "libtorch_cpu"):
        found = sorted(glob.glob(os.path.join(lib_dir, f"{name}.*")))
        if found:
            ctypes.CDLL(found[0], mode=ctypes.RTLD_GLOBAL)
    lib = ctypes.CDLL(str(built))
    lib.tcx_swap_cuda_guard.restype = ctypes.c_void_p
    lib.tcx_swap_cuda_guard.argtypes = [ctypes.c_void_p]
    lib.tcx_set_cudnn_version.argtypes = [ctypes.c_long]
    return lib


def _torch_dir() -> str:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.origin:
        raise RuntimeError("torch is not installed")
    return os.path.dirname(spec.origin)


def _build(torch_dir: str) -> Path:
    stamp = []
    for name in ("version.py", "lib"):
        path = os.path.join(torch_dir, name)
        stamp.append(f"{path}:{os.stat(path).st_mtime_ns}" if os.path.exists(path) else path)
    key = hashlib.sha256("\n".join([SOURCE, sys.executable, *stamp]).encode()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tcx" / "fakecuda"
    target = cache / f"tcx_fakecuda_{key}.so"
    if target.exists():
        return target
    compiler = os.environ.get("CXX") or shutil.which("g++") or shutil.which("c++") or shutil.which("clang++")
    if not compiler:
        raise RuntimeError("no C++ compiler found (install g++ or set CXX)")
    probe = subprocess.run(
        [sys.executable, "-c", _PROBE], capture_output=True, text=True, timeout=300, check=False
    )
    if probe.returncode != 0:
        raise RuntimeError(f"could not inspect torch: {probe.stderr.strip().splitlines()[-1:]}")
    info = json.loads(probe.stdout.strip().splitlines()[-1])
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        src = Path(tmp) / "shim.cpp"
        src.write_text(SOURCE, encoding="utf-8")
        out = Path(tmp) / target.name
        cmd = [
            compiler,
            "-std=c++17",
            "-O1",
            "-w",
            "-shared",
            "-fPIC",
            f"-D_GLIBCXX_USE_CXX11_ABI={info['abi']}",
            *(f"-I{p}" for p in info["include"]),
            str(src),
            f"-L{info['lib']}",
            "-lc10",
            "-ltorch_cpu",
            f"-Wl,-rpath,{info['lib']}",
            "-o",
            str(out),
        ]
        if sys.platform == "darwin":
            cmd = [c for c in cmd if not c.startswith("-Wl,-rpath")] + ["-undefined", "dynamic_lookup"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
        if done.returncode != 0:
            raise RuntimeError(f"{Path(compiler).name} failed: {done.stderr.strip()[-400:]}")
        os.replace(out, target)
    return target
