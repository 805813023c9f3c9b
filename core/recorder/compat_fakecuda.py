"""Compatibility layer: the CUDA preview — Inductor's Triton code for a chosen GPU, without a GPU.

Private-API monkeypatching, isolated here and version-gated (research/capture/fakecuda.py,
verified against a real H200 run). Dynamo, the joint graph and the partitioner run on the
CPU as usual; every partitioned graph handed to Inductor's inner compile is also copied,
retargeted to `cuda:0` (FakeTensors) and lowered again under a fake CUDA environment for
the chosen architecture; tcx keeps the generated wrapper (kernels embedded) and stops
before anything would be compiled for or launched on a device. The CPU compile then runs
normally so the program keeps going.

    cuda_preview=sm_90[+ptx]   one `cuda_preview` event per graph: arch, compile_id, graph,
                               source (the wrapper module), seconds, error; with +ptx each
                               Triton kernel's PTX (Triton's ahead-of-time compile)
    device=cuda                torch.set_default_device (the real CUDA path on a GPU machine)
"""

from __future__ import annotations

import collections
import contextlib
import copy
import functools
import re
import sys
import time
from collections.abc import Iterator
from typing import Any

import torch

from tcx.core.recorder.compat import TORCH_VERSION, current_compile_id, unavailable
from tcx.core.recording import RecordingWriter

MIN_TORCH = (2, 11)
MAX_PTX_CHARS = 400_000
_TRITON_KERNEL = re.compile(
    r"^(\w+) = async_compile\.triton\('\w+', '''(.*?)''', device_str='cuda'\)", re.S | re.M
)

Props = collections.namedtuple(
    "Props",
    "name major minor multi_processor_count total_memory warp_size max_threads_per_multi_processor "
    "max_threads_per_block regs_per_multiprocessor shared_memory_per_block_optin "
    "shared_memory_per_multiprocessor L2_cache_size gcnArchName uuid",
)


PREVIEW_ACTIVE = False  # read by compat_inductor: fusion events of the preview say so


class CodegenOnly(Exception):
    """Raised right after Inductor generated the wrapper: nothing is compiled or launched."""


def parse_arch(text: str) -> int:
    """ "sm_90", "90", "sm90", "sm_90a" -> 90."""
    m = re.fullmatch(r"(?:sm_?)?(\d{2,3})a?", text.strip().lower())
    if not m:
        raise ValueError(f"not a CUDA architecture: {text!r} (use e.g. sm_80, sm_90)")
    return int(m.group(1))


def fake_props(arch: int) -> Props:
    return Props(
        f"tcx preview sm_{arch}",
        arch // 10,
        arch % 10,
        132,
        80 * 2**30,
        32,
        2048,
        1024,
        65536,
        232448,
        233472,
        50 * 2**20,
        "",
        "tcx-preview",
    )


def availability() -> str | None:
    """None when the preview can run on this torch/triton, else why not."""
    version = tuple(int(p) for p in re.findall(r"\d+", TORCH_VERSION)[:2])
    if version < MIN_TORCH:
        return (
            f"the CUDA preview is not available on torch {TORCH_VERSION} "
            f"(needs torch >= {MIN_TORCH[0]}.{MIN_TORCH[1]})"
        )
    try:
        import triton  # noqa: F401
        from triton.backends.compiler import GPUTarget  # noqa: F401
        from triton.compiler.compiler import make_backend  # noqa: F401
    except ImportError as exc:
        return unavailable("the CUDA preview (pip install triton, or tcx[cuda-preview])", exc)
    try:
        import torch._dynamo.device_interface as di  # noqa: F401
        import torch._inductor.graph
        import torch.utils._triton  # noqa: F401
        from torch._inductor.compile_fx import compile_fx, compile_fx_inner  # noqa: F401
        from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: F401
    except ImportError as exc:
        return unavailable("the CUDA preview", exc)
    return None


_PATTERNS_READY = False


def _init_patterns_on_cpu() -> None:
    """Pattern registries trace examples with real tensors on the device that 'is available' at
    first use: initialise them while CUDA is truthfully unavailable, then ignore input_device."""
    global _PATTERNS_READY
    if _PATTERNS_READY:
        return
    from torch._inductor.fx_passes import joint_graph as jg
    from torch._inductor.fx_passes import post_grad as pg

    jg.lazy_init()
    pg.lazy_init()
    a, b = jg.lazy_init, pg.lazy_init
    jg.lazy_init = lambda *x, **k: a()
    pg.lazy_init = lambda *x, **k: b()
    _PATTERNS_READY = True


@contextlib.contextmanager
def fake_cuda_env(arch: int) -> Iterator[None]:
    import torch._dynamo.device_interface as di
    import torch._inductor.codegen.triton
    import torch._inductor.scheduler
    import torch._subclasses.fake_tensor as fake_tensor_mod
    import torch.utils._triton as ut
    from torch._subclasses.fake_tensor import FakeTensorMode
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    _init_patterns_on_cpu()
    props_value = fake_props(arch)

    def props(device: Any = None) -> Props:
        return props_value

    rng = torch.zeros(16, dtype=torch.uint8)
    tc, ci = torch.cuda, di.CudaInterface
    patches: list[tuple[Any, str, Any]] = [
        (tc, "is_available", lambda: True),
        (tc, "device_count", lambda: 1),
        (tc, "current_device", lambda: 0),
        (tc, "get_device_properties", props),
        (tc, "get_device_capability", lambda d=None: (props_value.major, props_value.minor)),
        (tc, "get_device_name", lambda d=None: props_value.name),
        (tc, "is_bf16_supported", lambda *a, **k: True),
        (tc, "_lazy_init", lambda: None),
        (tc, "set_device", lambda d: None),
        (tc, "synchronize", lambda *a, **k: None),
        (tc, "_exchange_device", lambda d: -1),
        (tc, "_maybe_exchange_device", lambda d: -1),
        (tc, "get_rng_state", lambda device="cuda": rng.clone()),
        (tc, "set_rng_state", lambda s, device="cuda": None),
        (ci, "is_available", staticmethod(lambda: True)),
        (ci, "device_count", staticmethod(lambda: 1)),
        (ci, "current_device", staticmethod(lambda: 0)),
        (ci, "get_device_properties", staticmethod(props)),
        (ci, "get_compute_capability", staticmethod(lambda d=None: arch)),
        (ci, "get_raw_stream", staticmethod(lambda i: 0)),
        (ci.Worker, "get_device_properties", staticmethod(props)),
        (ci.Worker, "current_device", staticmethod(lambda: 0)),
        # FakeTensorMode makes CUDA fakes without a device only while it thinks CUDA is unavailable.
        (FakeTensorMode, "avoid_device_init", property(lambda self: True)),
        # FakeTensor.__new__ -> init_gpu_context() would allocate a real CUDA tensor.
        (fake_tensor_mod, "init_gpu_context", lambda device: None),
        # Inductor asks the Triton driver for the current target (backend_hash).
        (ut, "triton_backend", functools.cache(lambda: make_backend(GPUTarget("cuda", arch, 32)))),
    ]
    saved: list[tuple[Any, str, Any, bool]] = []
    orig_has_triton = ut.has_triton
    rebinds = [
        (m, k)
        for m in list(sys.modules.values())
        if getattr(m, "__name__", "").startswith("torch")
        for k, v in list(vars(m).items())
        if v is orig_has_triton
    ]
    try:
        for obj, name, value in patches:
            if isinstance(obj, type):
                saved.append((obj, name, obj.__dict__.get(name), name in obj.__dict__))
            else:
                saved.append((obj, name, getattr(obj, name, None), hasattr(obj, name)))
            setattr(obj, name, value)
        for m, k in rebinds:
            setattr(m, k, lambda: True)
        di.caching_worker_device_properties["cuda"] = [props_value]
        yield
    finally:
        for obj, name, value, existed in reversed(saved):
            if existed:
                setattr(obj, name, value)
            else:
                with contextlib.suppress(AttributeError):
                    delattr(obj, name)
        for m, k in rebinds:
            setattr(m, k, orig_has_triton)
        di.caching_worker_device_properties.pop("cuda", None)


def _retarget(gm: Any, example_inputs: list[Any]) -> tuple[Any, list[Any]]:
    """A deep copy of the graph and its inputs on `cuda:0` (FakeTensors in the inputs' own mode)."""
    from torch._guards import detect_fake_mode
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.passes.fake_tensor_prop import FakeTensorProp

    gm = copy.deepcopy(gm)
    cuda = torch.device("cuda", 0)
    for n in gm.graph.nodes:  # device constants baked into ops (full, empty, scalar_tensor ...)
        dev = n.kwargs.get("device")
        if isinstance(dev, torch.device) and dev.type == "cpu":
            n.kwargs = {**n.kwargs, "device": cuda}
    gm.recompile()
    fm = detect_fake_mode(example_inputs) or FakeTensorMode()
    with fm:
        ins = [
            torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=cuda)
            if isinstance(t, torch.Tensor)
            else t
            for t in example_inputs
        ]
    FakeTensorProp(gm, fm).propagate_dont_convert_inputs(*ins)
    return gm, ins


def cuda_codegen(gm: Any, example_inputs: list[Any], arch: int, **inner_kwargs: Any) -> str | None:
    """Inductor's real compile_fx_inner for `cuda` on a retargeted copy, stopped after codegen."""
    import torch._inductor.graph as graph_mod
    from torch._inductor.compile_fx import compile_fx_inner

    out: list[str] = []
    original = graph_mod.GraphLowering.compile_to_module

    def compile_to_module(self: Any) -> Any:
        wrapper, _kernel = self.codegen_with_cpp_wrapper() if self.cpp_wrapper else self.codegen()
        out.append(getattr(wrapper, "value", wrapper))
        raise CodegenOnly()

    global PREVIEW_ACTIVE
    with fake_cuda_env(arch):
        g2, ins = _retarget(gm, example_inputs)
        graph_mod.GraphLowering.compile_to_module = compile_to_module
        PREVIEW_ACTIVE = True
        try:
            compile_fx_inner(g2, ins, **inner_kwargs)
        except Exception as exc:
            cause: BaseException | None = exc
            while cause is not None and not isinstance(cause, CodegenOnly):
                cause = cause.__cause__ or cause.__context__
            if cause is None:
                raise
        finally:
            PREVIEW_ACTIVE = False
            graph_mod.GraphLowering.compile_to_module = original
    return out[0] if out else None


def kernel_ptx(wrapper_source: str, arch: int) -> dict[str, str]:
    """PTX of each Triton kernel in a preview wrapper, through Triton's ahead-of-time compile."""
    import importlib.util
    import os
    import tempfile

    import torch._inductor.config as inductor_config
    from torch._inductor.runtime import triton_helpers

    result: dict[str, str] = {}
    saved_launcher = inductor_config.use_static_cuda_launcher
    saved_driver = triton_helpers.set_driver_to_gpu
    inductor_config.use_static_cuda_launcher = False  # else no .asm on the compiled kernel
    triton_helpers.set_driver_to_gpu = lambda: None  # would load libcuda.so
    tmp = tempfile.mkdtemp(prefix="tcx-ptx-")
    try:
        with fake_cuda_env(arch):
            for name, source in _TRITON_KERNEL.findall(wrapper_source):
                try:
                    path = os.path.join(tmp, f"{name}.py")
                    with open(path, "w", encoding="utf-8") as fh:
                        fh.write(source)
                    spec = importlib.util.spec_from_file_location(f"tcx_ptx_{name}", path)
                    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
                    spec.loader.exec_module(module)  # type: ignore[union-attr]
                    tuner = getattr(module, name)
                    compiled = tuner._precompile_config(tuner.configs[0]).kernel
                    result[name] = str(compiled.asm["ptx"])[:MAX_PTX_CHARS]
                except Exception as exc:
                    result[name] = f"// PTX not available: {type(exc).__name__}: {exc}"
    finally:
        inductor_config.use_static_cuda_launcher = saved_launcher
        triton_helpers.set_driver_to_gpu = saved_driver
    return result


def install_cuda_preview(writer: RecordingWriter, argument: str = "sm_90") -> str | None:
    """Lower every partitioned graph a second time for a fake CUDA device of `argument`'s arch."""
    spec, _, flags = argument.partition("+")
    try:
        arch = parse_arch(spec)
    except ValueError as exc:
        return str(exc)
    why = availability()
    if why:
        return why
    if torch.cuda.is_available():
        return "a CUDA device is present: use --device cuda for the real CUDA path (no preview needed)"
    import torch._inductor.compile_fx as cfx

    want_ptx = "ptx" in flags.split("+")
    original_compile_fx = cfx.compile_fx

    def spy(gm: Any, example_inputs: Any, **kw: Any) -> Any:
        graph = "backward" if kw.get("is_backward") else "inference" if kw.get("is_inference") else "forward"
        cid, _ = current_compile_id()
        started = time.perf_counter()
        event: dict[str, Any] = {"arch": f"sm_{arch}", "compile_id": cid, "graph": graph}
        try:
            keep = (
                "is_backward",
                "graph_id",
                "is_inference",
                "static_input_idxs",
                "boxed_forward_device_index",
            )
            source = cuda_codegen(
                gm, list(example_inputs), arch, **{k: v for k, v in kw.items() if k in keep}
            )
            event["source"] = source
            if want_ptx and source:
                event["ptx"] = kernel_ptx(source, arch)
        except Exception as exc:  # the preview must never break the program's own compile
            event["error"] = f"{type(exc).__name__}: {str(exc)[:2000]}"
        event["seconds"] = round(time.perf_counter() - started, 4)
        writer.write("cuda_preview", **event)
        return cfx.compile_fx_inner(gm, example_inputs, **kw)

    @functools.wraps(original_compile_fx)
    def compile_fx(*args: Any, **kwargs: Any) -> Any:
        if "inner_compile" not in kwargs and len(args) < 3:
            kwargs["inner_compile"] = spy
        return original_compile_fx(*args, **kwargs)

    cfx.compile_fx = compile_fx
    return None


def install_default_device(writer: RecordingWriter, argument: str = "cuda") -> str | None:
    """`--device cuda`: tensors tcx builds (and the program's factory calls) land on that device."""
    try:
        device = torch.device(argument)
    except (RuntimeError, ValueError) as exc:
        return f"--device {argument}: {exc}"
    if device.type == "cuda" and not torch.cuda.is_available():
        return f"--device {argument}: no CUDA device here (use --target cuda:sm_90 for a preview)"
    torch.set_default_device(device)
    return None
