"""Compatibility layer: the CUDA preview — the whole compile pipeline for a chosen GPU, without a GPU.

The preview runs the program as `--device cuda` would run it on a GPU: every CUDA tensor is a
FakeTensor on `cuda:0` (shapes, dtypes, strides) that carries its value as a CPU tensor
(compat_fakecuda_values: each op runs on the fakes and on the values), `torch.cuda` reports one
device with the properties of the chosen architecture and a CUDA generator, and the CUDA device
guard is a stand-in (compat_fakecuda_shim). Dynamo, AOTAutograd (joint graph, decompositions,
partitioner) and Inductor therefore trace CUDA tensors and take the GPU's decisions: SDPA
backends, foreach grouping and combo kernels, padding and layouts, the optimizer's `capturable`
path, CUDA-graph checks. Inductor generates its wrapper and Triton kernels for real
(`cuda_preview` events) and stops before anything is compiled for or launched on a device; the
compiled function the program gets back is AOTAutograd's, running each graph Inductor compiled
op by op on the program's tensors, so lines that need a value (`.item()`, an `if` on a tensor)
get it and the program goes on.

A decision that needs a real GPU is taken by an assumption, recorded as a
`cuda_preview_decision` event that names what was decided and what was assumed:
autotuning (max-autotune), the pad_mm benchmark, the SDPA backend (tcx's model of torch's
C++ `select_sdp_backend`), and the runtime part of CUDA graphs.

    cuda_preview=sm_90[+ptx]   per graph: arch, compile_id, graph, source (the wrapper module),
                               seconds, error; with +ptx each Triton kernel's PTX
    device=cuda                torch.set_default_device (the real CUDA path on a GPU machine)
"""

from __future__ import annotations

import ctypes
import functools
import inspect
import re
import sys
import threading
import time
import types
from typing import Any

import torch

from tcx.core.ingest.recording import RecordingWriter
from tcx.core.recorder import (
    compat_fakecuda_random,
    compat_fakecuda_sdpa,
    compat_fakecuda_shim,
    compat_fakecuda_values,
)
from tcx.core.recorder.compat import TORCH_VERSION, current_compile_id, disable_compile_caches, unavailable
from tcx.core.torchtext.arch import arch_name, parse_arch
from tcx.core.torchtext.output_code import kernel_definitions

MIN_TORCH = (2, 11)
MAX_PTX_CHARS = 400_000
MAX_DECISIONS = 2000

PREVIEW_ACTIVE = False  # read by compat_inductor: fusion events of the preview say so

# Device properties assumed per architecture: the reference part of each generation (an
# sm_90 preview is an H100/H200 SXM: 132 SMs). Inductor reads SM count, registers, threads
# per SM, shared memory per block and the capability; the rest is for display.
GiB, MiB = 2**30, 2**20
DEVICES: dict[int, dict[str, Any]] = {
    70: dict(name="V100-SXM2", sms=80, smem_block=98304, smem_sm=98304, threads_sm=2048, l2=6 * MiB, mem=32),
    75: dict(name="T4", sms=40, smem_block=65536, smem_sm=65536, threads_sm=1024, l2=4 * MiB, mem=16),
    80: dict(
        name="A100-SXM4-80GB",
        sms=108,
        smem_block=166912,
        smem_sm=167936,
        threads_sm=2048,
        l2=40 * MiB,
        mem=80,
    ),
    86: dict(name="A10", sms=72, smem_block=101376, smem_sm=102400, threads_sm=1536, l2=6 * MiB, mem=24),
    89: dict(name="L4", sms=58, smem_block=101376, smem_sm=102400, threads_sm=1536, l2=48 * MiB, mem=24),
    90: dict(
        name="H100/H200 SXM", sms=132, smem_block=232448, smem_sm=233472, threads_sm=2048, l2=50 * MiB, mem=80
    ),
    100: dict(
        name="B200", sms=148, smem_block=232448, smem_sm=233472, threads_sm=2048, l2=126 * MiB, mem=180
    ),
    120: dict(
        name="RTX 5090", sms=170, smem_block=101376, smem_sm=102400, threads_sm=1536, l2=96 * MiB, mem=32
    ),
}


MEMORY_STATISTICS = ("memory_allocated", "max_memory_allocated", "memory_reserved", "max_memory_reserved")
MEMORY_RESETS = ("empty_cache", "reset_peak_memory_stats", "reset_max_memory_allocated")


class Props(types.SimpleNamespace):
    """What `torch.cuda.get_device_properties` returns for the previewed device."""


def fake_props(arch: int) -> Props:
    d = DEVICES[arch]
    return Props(
        name=f"tcx preview {arch_name(arch)} ({d['name']})",
        major=arch // 10,
        minor=arch % 10,
        multi_processor_count=d["sms"],
        total_memory=d["mem"] * GiB,
        warp_size=32,
        max_threads_per_multi_processor=d["threads_sm"],
        max_threads_per_block=1024,
        regs_per_multiprocessor=65536,
        shared_memory_per_block_optin=d["smem_block"],
        shared_memory_per_multiprocessor=d["smem_sm"],
        L2_cache_size=d["l2"],
        gcnArchName="",
        uuid="tcx-preview",
        is_integrated=0,
        is_multi_gpu_board=0,
        clock_rate=1980000,
        memory_clock_rate=2619000,
        memory_bus_width=5120,
        pci_bus_id=0,
        pci_device_id=0,
        pci_domain_id=0,
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
        from torch._inductor.compile_fx import compile_fx  # noqa: F401
        from torch._subclasses.fake_tensor import FakeTensorMode  # noqa: F401
    except ImportError as exc:
        return unavailable("the CUDA preview", exc)
    return None


# --- the fake device ---------------------------------------------------------------------------


def _rebind_everywhere(original: Any, replacement: Any) -> list[tuple[Any, str]]:
    """Point every torch module's name for `original` at `replacement` (functions imported by name)."""
    done = []
    for module in list(sys.modules.values()):
        if not getattr(module, "__name__", "").startswith("torch"):
            continue
        for key, value in list(vars(module).items()):
            if value is original:
                setattr(module, key, replacement)
                done.append((module, key))
    return done


def _patch(obj: Any, name: str, value: Any) -> None:
    setattr(obj, name, value)


def enter_fake_device(arch: int, lib: ctypes.CDLL | None) -> list[str]:
    """Make this process see one CUDA device of `arch` (for good: the preview child never leaves).

    Returns the assumptions it makes, for the preview's output."""
    import torch._dynamo.device_interface as di
    import torch._inductor.utils as iutils
    import torch._subclasses.fake_tensor as fake_tensor_mod
    import torch.utils._triton as ut
    from torch._subclasses.fake_tensor import FakeTensorMode
    from triton.backends.compiler import GPUTarget
    from triton.compiler.compiler import make_backend

    props = fake_props(arch)
    tc, ci = torch.cuda, di.CudaInterface
    cudnn_version = _cudnn_version()

    def get_props(device: Any = None) -> Props:
        return props

    for obj, name, value in [
        (tc, "is_available", lambda: True),
        (tc, "device_count", lambda: 1),
        (tc, "current_device", lambda: 0),
        (tc, "get_device_properties", get_props),
        (tc, "get_device_capability", lambda d=None: (props.major, props.minor)),
        (tc, "get_device_name", lambda d=None: props.name),
        (tc, "is_bf16_supported", lambda *a, **k: props.major >= 8),
        (tc, "mem_get_info", lambda d=None: (props.total_memory - GiB, props.total_memory)),
        (tc, "_lazy_init", lambda: None),
        (tc, "set_device", lambda d: None),
        (tc, "synchronize", lambda *a, **k: None),
        (tc, "_exchange_device", lambda d: 0),
        (tc, "_maybe_exchange_device", lambda d: 0),
        # no stream is ever captured; device memory is never allocated (its statistics read 0)
        (tc, "is_current_stream_capturing", lambda: False),
        *[(tc, name, lambda device=None: 0) for name in MEMORY_STATISTICS if hasattr(tc, name)],
        *[(tc, name, lambda device=None: None) for name in MEMORY_RESETS if hasattr(tc, name)],
        (torch.backends.cudnn, "is_available", lambda: True),
        (ci, "is_available", staticmethod(lambda: True)),
        (ci, "device_count", staticmethod(lambda: 1)),
        (ci, "current_device", staticmethod(lambda: 0)),
        (ci, "get_device_properties", staticmethod(get_props)),
        (ci, "get_compute_capability", staticmethod(lambda d=None: arch)),
        (ci, "get_raw_stream", staticmethod(lambda i: 0)),
        (ci, "synchronize", staticmethod(lambda *a, **k: None)),
        (ci.Worker, "get_device_properties", staticmethod(get_props)),
        (ci.Worker, "current_device", staticmethod(lambda: 0)),
        # FakeTensorMode makes CUDA fakes without a device only while it thinks CUDA is unavailable.
        (FakeTensorMode, "avoid_device_init", property(lambda self: True)),
        # FakeTensor.__new__ -> init_gpu_context() would allocate a real CUDA tensor.
        (fake_tensor_mod, "init_gpu_context", lambda device: None),
        # Inductor asks the Triton driver for the current target (backend_hash).
        (ut, "triton_backend", functools.cache(lambda: make_backend(GPUTarget("cuda", arch, 32)))),
    ]:
        _patch(obj, name, value)
    if hasattr(tc, "graphs"):
        tc.graphs.is_current_stream_capturing = tc.is_current_stream_capturing
    _rebind_everywhere(ut.has_triton, lambda: True)
    if hasattr(iutils, "get_gpu_shared_memory"):
        _rebind_everywhere(iutils.get_gpu_shared_memory, lambda: props.shared_memory_per_block_optin)
    di.caching_worker_device_properties["cuda"] = [props]
    if not hasattr(torch._C, "_cuda_cudaCachingAllocator_is_enabled"):  # a CPU-only build
        torch._C._cuda_cudaCachingAllocator_is_enabled = lambda: True
    if lib is not None:
        lib.tcx_swap_cuda_guard(None)
        lib.tcx_set_cudnn_version(cudnn_version or 0)
    assumed = [
        f"device: {arch_name(arch)} with the properties of an {DEVICES[arch]['name']}: "
        f"{props.multi_processor_count} SMs, {props.shared_memory_per_block_optin} bytes of shared "
        f"memory per block, {props.max_threads_per_multi_processor} threads per SM",
        f"cuDNN {cudnn_version or 'none'} ({'this torch build' if _cudnn_from_build() else 'assumed'})",
    ]
    return assumed


def _cudnn_from_build() -> bool:
    try:
        return torch.backends.cudnn.version() is not None
    except Exception:
        return False


# cuDNN of the torch 2.11+cu130 wheels (seen on the H200): the SDPA model's cuDNN when this
# torch has none (a CPU-only build). Above 9.15 torch puts cuDNN attention first on sm90/sm10x.
ASSUMED_CUDNN = 91900


def _cudnn_version() -> int | None:
    try:
        return torch.backends.cudnn.version() or ASSUMED_CUDNN
    except Exception:
        return ASSUMED_CUDNN


# --- the program on fake tensors ---------------------------------------------------------------


class _CudaOnCpu(torch.utils._python_dispatch.TorchDispatchMode):
    """Real computations Inductor runs at compile time (constant folding) land on the CPU."""

    def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
        from torch.utils._pytree import tree_map

        def cpu(a: Any) -> Any:
            return torch.device("cpu") if isinstance(a, torch.device) and a.type == "cuda" else a

        args, kwargs = tree_map(cpu, (args, kwargs or {}))
        return func(*args, **kwargs)


_LIBRARIES: list[Any] = []  # keeps the kernel registrations alive


def route_cuda_allocations() -> None:
    """A CUDA allocation (`torch.empty(..., device="cuda")`, and every factory and `.to("cuda")`
    built on it) makes a fake CUDA tensor of the program's mode with a CPU twin for its value: on a
    GPU it would be a real allocation; here there is no device memory."""
    from torch.utils._mode_utils import no_dispatch

    def device_of(device: Any) -> torch.device:
        device = torch.device(device or "cuda")
        return device if device.index is not None else torch.device(device.type, 0)

    def empty(size: Any, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
        with no_dispatch():
            meta = torch.empty(size, dtype=dtype, layout=layout, device="meta", memory_format=memory_format)
        return compat_fakecuda_values.new_cuda_tensor(meta, device_of(device))

    def empty_strided(size: Any, stride: Any, *, dtype=None, layout=None, device=None, pin_memory=None):
        with no_dispatch():
            meta = torch.empty_strided(size, stride, dtype=dtype, layout=layout, device="meta")
        return compat_fakecuda_values.new_cuda_tensor(meta, device_of(device))

    lib = torch.library.Library("aten", "IMPL")
    lib.impl("empty.memory_format", empty, "CUDA")
    lib.impl("empty_strided", empty_strided, "CUDA")
    _LIBRARIES.append(lib)


class Preview:
    """Everything the preview installs in the child, and the events it writes."""

    def __init__(self, writer: RecordingWriter, arch: int, want_ptx: bool) -> None:
        self.writer, self.arch, self.want_ptx = writer, arch, want_ptx
        self.local = threading.local()
        self.decisions = 0
        self.seen: set[tuple] = set()

    def decision(self, kind: str, **fields: Any) -> None:
        """A decision that needs a real GPU (or a model of torch's C++), and what was assumed."""
        cid, _ = current_compile_id()
        key = (kind, cid, repr(sorted(fields.items())))
        if key in self.seen or self.decisions >= MAX_DECISIONS:
            return
        self.seen.add(key)
        self.decisions += 1
        self.writer.write(
            "cuda_preview_decision", decision=kind, compile_id=cid, graph=_lowering_kind(), **fields
        )

    # --- Inductor: codegen only ---------------------------------------------------------------

    def install_codegen_stop(self) -> None:
        import torch._inductor.graph as graph_mod

        preview = self

        def compile_to_module(self: Any) -> Any:
            started = time.perf_counter()
            cid, _ = current_compile_id()
            from tcx.core.recorder.compat_inductor import graph_kind

            event: dict[str, Any] = {
                "arch": arch_name(preview.arch),
                "compile_id": cid,
                "graph": graph_kind(),
            }
            devices = sorted(str(d) for d in getattr(self, "device_types", ()) if d)
            if devices:
                event["devices"] = devices
            if devices and "cuda" not in devices:
                # a graph of CPU tensors: no GPU code to preview, and its C++ is not generated (the
                # CPU's code generation compiles probes with the C++ compiler: seconds per graph)
                self.scheduler = types.SimpleNamespace(nodes=[])  # what Inductor logs after codegen
            else:
                try:
                    wrapper, _ = self.codegen_with_cpp_wrapper() if self.cpp_wrapper else self.codegen()
                    source = getattr(wrapper, "value", wrapper)
                    event["source"] = source
                    if preview.want_ptx and isinstance(source, str):
                        event["ptx"] = kernel_ptx(source, preview.arch)
                except Exception as exc:
                    event["error"] = f"{type(exc).__name__}: {str(exc)[:2000]}"
            event["seconds"] = round(time.perf_counter() - started, 4)
            preview.writer.write("cuda_preview", **event)
            self.cache_key, self.cache_path, self.cache_linemap = "tcx-cuda-preview", None, []
            module = types.ModuleType("tcx_cuda_preview")
            module.__file__ = "<tcx cuda preview>"
            module.call = _never_run
            # graph partitions (CUDA graphs per partition) are wrapped through the module's runner
            module.runner = types.SimpleNamespace(
                partitions=[], recursively_apply_fns=lambda fns: [f(_never_run) for f in fns]
            )
            return module

        graph_mod.GraphLowering.compile_to_module = compile_to_module

    def install_compile_fx(self) -> None:
        """Every graph Inductor compiles for the GPU runs, when the program calls it, op by op on
        the program's tensors (compat_fakecuda_values.EagerGraph), behind AOTAutograd's runtime."""
        import torch._inductor.compile_fx as cfx

        original = cfx.compile_fx
        local = self.local

        def preview_inner(inner: Any) -> Any:
            def compile_inner(gm: Any, example_inputs: Any, *args: Any, **kwargs: Any) -> Any:
                if getattr(local, "inner", False):
                    return inner(gm, example_inputs, *args, **kwargs)
                graph = compat_fakecuda_values.snapshot(gm)
                local.inner = True
                try:
                    compiled = inner(gm, example_inputs, *args, **kwargs)
                finally:
                    local.inner = False
                if hasattr(compiled, "current_callable"):
                    compiled.current_callable = compat_fakecuda_values.EagerGraph(graph)
                    if getattr(compiled, "compiled_fn_runner", None) is not None:
                        compiled.compiled_fn_runner = None
                return compiled

            return compile_inner

        @functools.wraps(original)
        def compile_fx(model: Any, example_inputs: Any, *args: Any, **kwargs: Any) -> Any:
            if args:
                args = (preview_inner(args[0]), *args[1:])
            else:
                kwargs["inner_compile"] = preview_inner(kwargs.get("inner_compile") or cfx.compile_fx_inner)
            return original(model, example_inputs, *args, **kwargs)

        cfx.compile_fx = compile_fx

    # --- what depends on random numbers -------------------------------------------------------

    def install_random_reads(self) -> tuple[compat_fakecuda_random.RandomReads, str | None]:
        """Each compile Dynamo starts is named when it follows reads of values drawn from the CUDA
        generator or takes tensors whose sizes depend on them (compat_fakecuda_random)."""
        reads = compat_fakecuda_random.RandomReads(self.random_values)
        try:
            import torch._dynamo.convert_frame as convert_frame

            original = convert_frame._compile
            params = list(inspect.signature(original).parameters)
        except (ImportError, AttributeError, TypeError, ValueError) as exc:
            return reads, unavailable("naming the compiles that depend on random values", exc)
        if params[:3] != ["code", "globals", "locals"] or "compile_id" not in params:
            return reads, (
                f"naming the compiles that depend on random values is not available on torch "
                f"{TORCH_VERSION} (Dynamo's _compile takes {params[:4]})"
            )

        @functools.wraps(original)
        def compile_frame(code: Any, globals: Any, locals: Any, *args: Any, **kwargs: Any) -> Any:
            cid = kwargs.get("compile_id")
            try:
                reads.compile_starts(str(cid) if cid is not None else None, locals or {}, _is_ours)
            except Exception as exc:  # naming must never change what Dynamo compiles
                self.writer.write("cuda_preview_note", note=f"random values: {type(exc).__name__}: {exc}")
            return original(code, globals, locals, *args, **kwargs)

        convert_frame._compile = compile_frame
        return reads, None

    def random_values(self, compile_id: str | None, reads: list[dict], sized: list[dict]) -> None:
        self.writer.write(
            "cuda_preview_decision",
            decision="random_values",
            compile_id=compile_id,
            graph=None,
            assumed="the CPU generator's numbers",
            why="values drawn from the CUDA generator are the CPU generator's here (the GPU's "
            "Philox streams are not reproduced): a branch, size or constant that depends on them "
            "can differ on a GPU, and with it which graph compiles and what it holds",
            reads=reads,
            inputs=sized,
        )

    # --- decisions that need a GPU ------------------------------------------------------------

    def install_autotune(self) -> str | None:
        try:
            from torch._inductor.select_algorithm import AlgorithmSelectorCache, ExternKernelCaller
        except ImportError as exc:
            return unavailable("the autotuning stand-in", exc)
        original = AlgorithmSelectorCache.__call__
        preview = self

        @functools.wraps(original)
        def call(self: Any, name: Any, choices: Any, input_nodes: Any, layout: Any, *a: Any, **k: Any) -> Any:
            if len(choices) > 1:
                keep = next((c for c in choices if isinstance(c, ExternKernelCaller)), choices[0])
                preview.decision(
                    "autotune",
                    op=str(name),
                    inputs=[_size(n) for n in input_nodes],
                    choices=len(choices),
                    names=[_choice_name(c) for c in choices][:40],
                    assumed=_choice_name(keep),
                    why="max-autotune benchmarks every choice on the GPU; the preview keeps the ATen "
                    "kernel Inductor uses without autotuning",
                )
                choices = [keep]
            return original(self, name, choices, input_nodes, layout, *a, **k)

        AlgorithmSelectorCache.__call__ = call
        return None

    def install_pad_mm(self) -> None:
        try:
            from torch._inductor.fx_passes import pad_mm
        except ImportError:
            return
        original = getattr(pad_mm, "_should_pad", None)
        if original is None:
            return
        preview = self

        def should_pad(match: Any, mat1: Any, mat2: Any, op: Any, input: Any = None) -> bool:
            try:
                return bool(original(match, mat1, mat2, op, input))
            except Exception:
                preview.decision(
                    "pad_mm",
                    op=str(op),
                    inputs=[list(map(str, t.shape)) for t in (mat1, mat2)],
                    assumed="not padded",
                    why="Inductor times the padded and unpadded matmul on the GPU",
                )
                return False

        pad_mm._should_pad = should_pad

    def install_constant_folding(self) -> None:
        try:
            from torch._inductor.constant_folding import ConstantFolder
        except ImportError:
            return
        original = ConstantFolder.run

        @functools.wraps(original)
        def run(self: Any, *args: Any, **kwargs: Any) -> Any:
            with _CudaOnCpu():
                return original(self, *args, **kwargs)

        ConstantFolder.run = run

    def install_sdpa(self, cudnn_version: int | None) -> str | None:
        return compat_fakecuda_sdpa.install(
            self.arch,
            cudnn_version,
            lambda choice: self.decision(
                "sdpa",
                assumed=choice["backend"],
                why="tcx's model of torch's C++ select_sdp_backend for this architecture "
                "(the CUDA runtime is needed to run torch's own)",
                **choice,
            ),
        )

    def install_config(self) -> list[str]:
        notes = []
        import torch._inductor.config as inductor_config

        inductor_config.compile_threads = 1  # no worker pool: nothing is compiled for the device
        # a preview's compiled graphs are not the device's code: nothing is read from or written to
        # the compile caches (a hit would also skip the stages the preview records)
        why = disable_compile_caches()
        if why:
            notes.append(why)
        return notes


def _lowering_kind() -> str | None:
    """forward/backward/inference while Inductor lowers a graph; None while Dynamo or AOTAutograd
    trace (a decision there applies to the whole compile)."""
    try:
        from torch._inductor.graph import GraphLowering
        from torch._inductor.virtualized import V

        if not isinstance(V.graph, GraphLowering):
            return None
    except Exception:
        return None
    from tcx.core.recorder.compat_inductor import graph_kind

    return graph_kind()


def _is_ours(t: Any) -> bool:
    return compat_fakecuda_values.is_ours(t)


def _never_run(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("tcx CUDA preview: generated code is never run")


def _size(node: Any) -> list[str]:
    try:
        return [str(s) for s in node.get_size()]
    except Exception:
        return []


def _choice_name(choice: Any) -> str:
    for attr in ("name", "kernel_name"):
        value = getattr(choice, attr, None)
        if isinstance(value, str) and value:
            return value
    return type(choice).__name__


def install_cuda_preview(writer: RecordingWriter, argument: str = "sm_90") -> str | None:
    """Run the program on fake CUDA tensors of `argument`'s arch; record Inductor's code per graph."""
    global PREVIEW_ACTIVE
    spec, _, flags = argument.partition("+")
    arch = parse_arch(spec)
    if arch is None:
        return f"not a CUDA architecture: {spec!r} (use e.g. sm_80, sm_90)"
    if arch not in DEVICES:
        known = ", ".join(arch_name(a) for a in DEVICES)
        return f"no device properties known for {arch_name(arch)} (the preview knows {known})"
    why = availability()
    if why:
        return why
    if torch.cuda.is_available():
        return "a CUDA device is present: use --device cuda for the real CUDA path (no preview needed)"
    lib, why = compat_fakecuda_shim.library()
    if lib is None:
        return why
    from torch._subclasses.fake_tensor import FakeTensorMode

    preview = Preview(writer, arch, "ptx" in flags.split("+"))
    assumptions = enter_fake_device(arch, lib)
    notes = preview.install_config()
    preview.install_codegen_stop()
    preview.install_compile_fx()
    preview.install_constant_folding()
    preview.install_pad_mm()
    for extra in (preview.install_autotune(), preview.install_sdpa(_cudnn_version())):
        if extra:
            notes.append(extra)
    torch.autograd.set_multithreading_enabled(False)  # one thread: no per-device autograd workers
    # The program's CUDA tensors: fakes of one mode, each with its value (a CPU twin). The mode is
    # not entered: CPU tensors stay real, and an op reaches the mode through its fake arguments.
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    reads, why = preview.install_random_reads()
    if why:
        notes.append(why)
    compat_fakecuda_values.install_values(mode, reads)
    compat_fakecuda_random.install_cuda_rng()
    compat_fakecuda_values.install_tensor_patches()
    route_cuda_allocations()
    # torch.tensor(data, device="cuda") builds the CPU tensor, then moves it through the dispatcher
    torch._C._set_only_lift_cpu_tensors(True)
    torch.set_default_device("cuda")
    PREVIEW_ACTIVE = True
    writer.write("cuda_preview_device", arch=arch_name(arch), assumptions=assumptions, notes=notes)
    return None


def kernel_ptx(wrapper_source: str, arch: int) -> dict[str, str]:
    """PTX of each Triton kernel in a preview wrapper, through Triton's ahead-of-time compile."""
    import importlib.util
    import os
    import tempfile

    import torch._inductor.config as inductor_config
    from torch._inductor.runtime import triton_helpers
    from torch._subclasses.fake_tensor import unset_fake_temporarily

    result: dict[str, str] = {}
    saved_launcher = inductor_config.use_static_cuda_launcher
    saved_driver = triton_helpers.set_driver_to_gpu
    inductor_config.use_static_cuda_launcher = False  # else no .asm on the compiled kernel
    triton_helpers.set_driver_to_gpu = lambda: None  # would load libcuda.so
    tmp = tempfile.mkdtemp(prefix="tcx-ptx-")
    try:
        with unset_fake_temporarily(), torch.device("cpu"):
            for k in kernel_definitions(wrapper_source):
                if k.kind != "triton":
                    continue
                try:
                    path = os.path.join(tmp, f"{k.name}.py")
                    with open(path, "w", encoding="utf-8") as fh:
                        fh.write(k.source)
                    spec = importlib.util.spec_from_file_location(f"tcx_ptx_{k.name}", path)
                    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
                    spec.loader.exec_module(module)  # type: ignore[union-attr]
                    tuner = getattr(module, k.name)
                    compiled = tuner._precompile_config(tuner.configs[0]).kernel
                    result[k.name] = str(compiled.asm["ptx"])[:MAX_PTX_CHARS]
                except Exception as exc:
                    result[k.name] = f"// PTX not available: {type(exc).__name__}: {exc}"
    finally:
        inductor_config.use_static_cuda_launcher = saved_launcher
        triton_helpers.set_driver_to_gpu = saved_driver
    return result


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
