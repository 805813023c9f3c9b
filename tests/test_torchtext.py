"""core/torchtext: each parser of torch's text on samples saved from real torch runs (no torch needed).

The samples and how they were made: tests/data/torchtext/README.md.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tcx.core.ingest.trace_log import load_trace
from tcx.core.model import build_model
from tcx.core.torchtext import arch, dtypes, fx_graph, guards, names, output_code
from tcx.core.torchtext.locations import Location, fx_node_location, guard_location

DATA = Path(__file__).parent / "data"
SAMPLES = DATA / "torchtext"
PROGRAM = "fixtures/programs/recompiles/guard_shapes.py"
VERSIONS = ("2.13", "2.14")


def sample(name: str) -> str:
    return (SAMPLES / name).read_text(encoding="utf-8")


def facts(g: guards.GuardFailure) -> tuple:
    return (g.kind, g.arg, g.dim, g.expected, g.actual)


# ---------------------------------------------------------------- guard failures

# The string, verbatim from a `generate()` run (and the first reason of guard_shapes.py).
POSITION_IDS = "tensor 'model_kwargs['position_ids']' size mismatch at index 1. expected 7, actual 8"


def test_a_source_with_quotes_and_brackets_is_read_whole():
    g = guards.parse_failure(POSITION_IDS)
    assert facts(g) == ("shape", "model_kwargs['position_ids']", 1, "7", "8")
    assert g.guard == POSITION_IDS


def test_the_live_form_of_the_same_failure_names_the_same_source():
    live = guards.parse_failure(
        POSITION_IDS.replace("'model_kwargs['position_ids']'", "'L['model_kwargs']['position_ids']'")
    )
    assert facts(live) == ("shape", "model_kwargs['position_ids']", 1, "7", "8")
    assert live.guard == POSITION_IDS  # torch's strip_local_scope, as the offline reason has it


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "tensor 'x['a']['b']' dtype mismatch. expected Float, actual Double",
            ("dtype", "x['a']['b']", None, "Float", "Double"),
        ),
        ("tensor 'x' stride mismatch at index 0. expected 4, actual 8", ("stride", "x", 0, "4", "8")),
        (
            "tensor 'L['x']' dispatch key set mismatch. expected DispatchKeySet(CPU, BackendSelect), "
            "actual DispatchKeySet(CPU, BackendSelect, ADInplaceOrView, AutogradCPU)",
            (
                "dispatch",
                "x",
                None,
                "DispatchKeySet(CPU, BackendSelect)",
                "DispatchKeySet(CPU, BackendSelect, ADInplaceOrView, AutogradCPU)",
            ),
        ),
        (
            "tensor 'L['t']' Tensor device index mismatch. Expected device index to be 0, actual 1",
            ("device", "t", None, "0", "1"),
        ),
    ],
)
def test_tensor_messages_torch_formats_but_this_run_did_not_produce(text, expected):
    """Message shapes from torch's TensorCheck::check_verbose (guards.cpp) with sources like the
    ones above: the values around commas stay whole."""
    assert facts(guards.parse_failure(text)) == expected


# compile id of the recompile -> facts of its first failing guard (the newest entry's), and its entry
REASONS = {
    "0/1": ("0/0", ("shape", "model_kwargs['position_ids']", 1, "7", "8")),
    "0/2": ("0/1", ("dtype", "model_kwargs['position_ids']", None, "Float", "Double")),
    "1/1": ("1/0", ("global", "SCALE", None, "2", None)),
    "1/2": ("1/1", ("requires_grad", "x", None, "False", "True")),
    "1/3": ("1/2", ("requires_grad", "x", None, "True", "False")),
    "1/4": ("1/3", ("global_state", "grad_mode", None, None, None)),
    "2/1": ("2/0", ("int", "n", None, "2", None)),
    "2/2": ("2/1", ("type", "n", None, None, None)),
    "3/1": ("3/0", ("dynamic_shape", "x", 0, "5 <= x.size()[0]", None)),
    "4/1": ("4/0", ("aliasing", None, None, None, None)),
    "5/1": ("5/0", ("stride", "x", 0, "4", "8")),
    "6/1": ("6/0", ("attribute", "m.k", None, "2", None)),
    "7/1": ("7/0", ("length", "len(xs)", None, "2", None)),
    "8/1": ("8/0", ("backend", None, None, None, None)),
}


def recompile_reasons(version: str = "2.13") -> list[dict]:
    return json.loads(sample(f"torch{version}_recompile_reasons.json"))


@pytest.mark.parametrize("version", VERSIONS)
def test_every_recompile_reason_of_a_real_run(version):
    reasons = recompile_reasons(version)
    assert [r["compile_id"] for r in reasons] == list(REASONS)
    for r in reasons:
        pairs = guards.recompile_reasons(r["payload"])
        entry, text = pairs[0]
        want_entry, want = REASONS[r["compile_id"]]
        assert entry == want_entry
        assert facts(guards.parse_failure(text)) == want, r["compile_id"]
        assert all("User stack trace" not in t for _, t in pairs)
    # The rank check of 1/3's second entry, and the entry order Dynamo checked (newest first).
    [third] = [r for r in reasons if r["compile_id"] == "1/3"]
    pairs = guards.recompile_reasons(third["payload"])
    assert [e for e, _ in pairs] == ["1/2", "1/1", "1/0"]
    assert facts(guards.parse_failure(pairs[1][1])) == ("rank", "x", None, "1", "2")


@pytest.mark.parametrize("version", VERSIONS)
def test_locations_in_recompile_reasons(version):
    by_id = {
        r["compile_id"]: guards.recompile_reasons(r["payload"])[0][1] for r in recompile_reasons(version)
    }

    def where(cid: str) -> tuple | None:
        loc = guards.parse_failure(by_id[cid]).location
        # torch shortens the path (torch 2.14 here cut it mid-word: `ork/main/fixtures/...`)
        return loc and (loc.file.endswith(PROGRAM), loc.line, loc.function, loc.code)

    assert where("1/1") == (True, 18, "scaled", "return x * SCALE")
    # a hint after the location: ` (HINT: ...)` and ` (_dynamo/...:N in evaluate_expr)`
    assert where("2/2") == (True, 22, "times", "return x * n")
    assert where("3/1") == (True, 26, "branch", "if x.shape[0] > 4:")
    assert where("6/1") == (True, 45, "forward", "return x * self.k")
    assert where("0/1") is None


@pytest.mark.parametrize("version", VERSIONS)
def test_live_check_verbose_parts_read_like_the_offline_reasons(version):
    """The same program's failing guards, read live (`L['x']` kept, other ids) and from the log."""
    offline = [
        guards.parse_failure(text)
        for r in recompile_reasons(version)
        if r["compile_id"] != "8/1"  # the backend check is not a guard check_verbose sees
        for _, text in guards.recompile_reasons(r["payload"])
    ]
    live = [
        guards.parse_failure(p["failed"]) for p in json.loads(sample(f"torch{version}_check_verbose.json"))
    ]
    assert "L['" in json.loads(sample(f"torch{version}_check_verbose.json"))[0]["failed"]
    assert [facts(g) for g in live] == [facts(g) for g in offline]
    assert [g.location for g in live] == [g.location for g in offline]


def test_sources():
    assert guards.strip_local_scope("5 <= L['x'].size()[0]") == "5 <= x.size()[0]"
    assert guards.source_name("L['model_kwargs']['position_ids']") == "model_kwargs['position_ids']"
    assert guards.source_name("G['SCALE']") == "SCALE"
    assert guards.source_name("len(L['xs'])") == "len(xs)"
    assert guards.size_source("2 <= L['args'][0].size()[0]") == ("args[0]", 0)
    assert guards.size_source("L['model_kwargs']['position_ids'].size()[1]") == (
        "model_kwargs['position_ids']",
        1,
    )
    assert guards.size_source("x.size()[0] <= 64") == ("x", 0)
    assert guards.scoped_sources("L['x'].stride()[1] == L['x'].size()[0] + len(L['xs'])") == [
        "L['x'].stride()[1]",
        "L['x'].size()[0]",
        "L['xs']",
    ]


# ---------------------------------------------------------------- the guard tree


def test_guard_tree_leaves_and_their_sources():
    leaves = guards.guard_tree_leaves(sample("torch2.13_guard_tree_step.txt"))
    tensors = [leaf for leaf in leaves if leaf.kind == "TENSOR_MATCH"]
    assert [leaf.source for leaf in tensors] == ["L['input_ids']", "L['model_kwargs']['position_ids']"]
    check = guards.parse_check_tensor(tensors[1].text)
    assert check == guards.TensorCheck(
        "L['model_kwargs']['position_ids']", "Tensor", "float32", "None", False, "[1, 7]", "[7, 1]"
    )
    assert check.describe() == "Tensor float32 size=[1, 7] stride=[7, 1] requires_grad=False device=None"
    code = 'return input_ids + model_kwargs["position_ids"].sum()'
    assert guard_location(tensors[1].text) == Location(PROGRAM, 14, "step", code)
    # A guard Dynamo added for itself names Dynamo's frame, not a user line.
    ambient = next(leaf for leaf in leaves if leaf.kind == "LAMBDA_GUARD")
    assert "init_ambient_guards" in ambient.text and guard_location(ambient.text) is None
    assert {leaf.kind for leaf in leaves} >= {"GLOBAL_STATE", "TYPE_MATCH", "NO_TENSOR_ALIASING"}


def test_symbolic_shape_guards_sit_at_the_root():
    leaves = guards.guard_tree_leaves(sample("torch2.13_guard_tree_scaled_dynamic.txt"))
    root = [guards.guard_code(leaf.text) for leaf in leaves if leaf.depth == 0]
    assert root == [
        "L['x'].stride()[1] == L['x'].size()[0]",
        "2 <= L['x'].size()[0]",
        "2 <= L['x'].size()[1]",
    ]
    [check] = [guards.parse_check_tensor(leaf.text) for leaf in leaves if leaf.kind == "TENSOR_MATCH"]
    assert (check.size, check.stride) == ("[None, None]", "[1, None]")
    [value] = [leaf for leaf in leaves if leaf.kind == "EQUALS_MATCH"]
    assert (value.source, guards.guard_code(value.text)) == ("G['SCALE']", "G['SCALE'] == 3")


def test_a_source_line_with_a_hash_keeps_its_comment():
    """`print("step done")  # a side effect ...` in demo.py: the user's line holds a `#` itself."""
    model = build_model(load_trace(DATA / "traces" / "torch2.13_eager_demo.log.gz"), "trace_log")
    texts = [
        leaf.text
        for ev in model.raw_trace_events()
        if ev.name == "dynamo_cpp_guards_str"
        for leaf in guards.guard_tree_leaves(ev.payload or "")
    ]
    codes = {loc.code for loc in map(guard_location, texts) if loc}
    assert 'print("step done")  # a side effect in the middle of the graph' in codes


def test_shape_guard_origin_without_dynamo_frame():
    where = "if x.shape[0] > 4:  # guard_shapes.py:26 in branch"
    where += " (_dynamo/variables/tensor.py:2606 in evaluate_expr)"
    assert guards.without_dynamo_site(where) == "if x.shape[0] > 4:  # guard_shapes.py:26 in branch"


# ---------------------------------------------------------------- FX graphs


@pytest.mark.parametrize("version", VERSIONS)
def test_aot_forward_graph_nodes(version):
    text = sample(f"torch{version}_seed_f_aot_forward_graph.txt")
    nodes = {n.name: n for n in fx_graph.parse_graph_nodes(text)}
    placeholders = [n.name for n in nodes.values() if n.placeholder]
    assert placeholders == ["primals_1", "primals_2", "primals_3"]
    assert nodes["primals_1"].type == fx_graph.TensorType("f32", ["128", "32"], "cpu")
    mm = nodes["mm"]
    assert (mm.op, mm.args) == ("aten.mm.default", ["primals_1", "primals_2"])
    assert mm.user_line == {
        "file": "/work/main/fixtures/programs/seed_f.py",  # recorded data, not read
        "line": 11,
        "function": "f",
        "code": "y = x @ weight + bias",
    }
    assert nodes["le"].type.dtype == "b8" and nodes["le"].type.bytes == 128 * 64
    assert nodes["relu"].type.bytes == 128 * 64 * 4
    assert fx_graph.saved_for_backward(text) == ["le", "permute", "permute_1"]
    assert fx_graph.op_base(nodes["permute"].op) == "permute"


@pytest.mark.parametrize("version", VERSIONS)
def test_backward_and_dynamo_graphs(version):
    backward = fx_graph.parse_graph_nodes(sample(f"torch{version}_seed_f_aot_backward_graph.txt"))
    inputs = [n.name for n in backward if n.placeholder]
    assert inputs[-1] == "tangents_1" and {"le", "permute", "permute_1"} <= set(inputs)
    dynamo = fx_graph.parse_graph_nodes(sample(f"torch{version}_seed_f_dynamo_output_graph.txt"))
    assert [n.name for n in dynamo if n.placeholder] == ["L_x_", "L_weight_", "L_bias_"]
    lines = {n.user_line["line"] for n in dynamo if n.user_line}
    assert lines == {11, 13}


def test_fx_file_comment():
    line = "        # File: /work/main/fixtures/programs/seed_f.py:13 in f, code: return torch.relu(y)"
    assert fx_node_location(line) == Location(
        "/work/main/fixtures/programs/seed_f.py",  # recorded data, not read
        13,
        "f",
        "return torch.relu(y)",
    )
    assert fx_node_location("relu = torch.relu(y)  # File: not a comment line") is None


# ---------------------------------------------------------------- output code


@pytest.mark.parametrize("version", VERSIONS)
def test_cpp_output_code(version):
    source = sample(f"torch{version}_seed_f_output_code_cpp_forward.py.txt")
    assert output_code.graph_of(source) == "forward" and output_code.code_device(source) == "cpu"
    [kernel] = output_code.kernel_definitions(source)
    assert (kernel.name, kernel.kind) == ("cpp_fused_relu_threshold_backward_0", "cpp_pybinding")
    assert output_code.kernel_kind(kernel.kind, kernel.source) == "cpp"
    assert output_code.count_kernels(source) == 1
    call = output_code.parse_call(source, {kernel.name})
    assert call.inputs == ["primals_1", "primals_2", "primals_3"]
    assert [(s.kind, s.name) for s in call.launches] == [
        ("extern", "extern_kernels.addmm"),
        ("launch", "cpp_fused_relu_threshold_backward_0"),
    ]
    buffers = {b.name: b for b in call.buffers}
    assert (buffers["buf0"].dtype, buffers["buf0"].bytes, buffers["buf0"].end) == (
        "float32",
        128 * 64 * 4,
        "reused",
    )
    assert (buffers["buf2"].dtype, buffers["buf2"].bytes) == ("bool", 128 * 64)
    assert (buffers["buf1"].origin, buffers["buf1"].storage) == ("reuse", "buf0")
    assert call.returns == ["buf1", "buf2", "primals_1", "primals_2"]
    assert [s.kind for s in call.steps] == ["alloc", "extern", "del", "reuse", "alloc", "launch", "return"]
    assert call.launches[0].aten == ["aten.add"]
    if version == "2.13":  # provenance handles: recorded by tcx's run, not by a plain TORCH_TRACE one
        assert call.launches[0].handle == "extern_kernels.addmm:1"


def test_symbolic_sizes_have_no_byte_count():
    source = sample("torch2.13_seed_f_output_code_cpp_backward_dynamic.py.txt")
    assert output_code.graph_of(source) == "backward"
    call = output_code.parse_call(source, {k.name for k in output_code.kernel_definitions(source)})
    buffers = {b.name: b for b in call.buffers}
    assert (buffers["buf0"].shape, buffers["buf0"].bytes) == (["s77", "64"], None)
    assert buffers["buf2"].bytes == 32 * 64 * 4


def test_triton_output_code_for_a_gpu():
    source = sample("torch2.13_seed_f_output_code_triton_sm90_preview_forward.py.txt")
    assert output_code.code_device(source) == "cuda"
    [kernel] = output_code.kernel_definitions(source)
    assert (kernel.name, kernel.kind) == ("triton_poi_fused_add_relu_threshold_backward_0", "triton")
    assert "@triton.jit" in kernel.source
    assert output_code.decode_name(kernel.name) == ("pointwise", ["add", "relu", "threshold_backward"])
    call = output_code.parse_call(source, {kernel.name})
    launch = call.launches[-1]
    assert (launch.kind, launch.name) == ("launch", kernel.name)
    assert launch.buffers == ["buf1", "primals_3", "buf2"]
    assert launch.source_nodes == ["y", "relu", "le"]
    assert call.source.lstrip().startswith("def call(self, args):")


def test_kernel_names():
    assert output_code.decode_name("cpp_fused_sum_threshold_backward_0") == (
        "?",
        ["sum", "threshold_backward"],
    )
    assert output_code.decode_name("triton_red_fused__softmax_1") == ("reduction", ["softmax"])
    assert output_code.decode_name("triton_per_fused_native_layer_norm_2") == (
        "persistent reduction",
        ["native_layer_norm"],
    )
    assert output_code.decode_name("not_a_kernel") == ("?", [])


# ---------------------------------------------------------------- names


def test_resume_function_names():
    sample_names = json.loads(sample("torch2.13_demo_code_names.json"))
    resumed = [n for n in sample_names["code_names"] if names.is_resume(n)]
    assert [names.parse_resume(n) for n in resumed] == [("g", 13), ("g", 15), ("g", 16)]
    assert names.display_name(resumed[0]) == "g (resumed after line 13)"
    assert (
        names.parse_resume("g") is None and names.display_name("g") == "g" and names.display_name(None) == "?"
    )
    assert names.resume_name("g", 13) == resumed[0]


def test_globals_the_transformed_code_calls():
    called = json.loads(sample("torch2.13_demo_code_names.json"))["transformed_code_globals"]
    assert all(names.is_generated_global(n) for n in called)
    resumes = [n for n in called if not names.is_compiled_graph_global(n)]
    assert sorted({names.resume_global_offset(n) for n in resumes}) == [66, 76, 116, 194]
    assert names.resume_global_offset("__compiled_fn_1") is None
    assert not names.is_generated_global("torch")


# ---------------------------------------------------------------- dtypes and GPU architectures


@pytest.mark.parametrize("version", VERSIONS)
def test_every_dtype_torch_abbreviates(version):
    for d in json.loads(sample(f"torch{version}_dtype_abbrs.json")):
        assert dtypes.itemsize(d["dtype"]) == d["itemsize"], d
        assert dtypes.itemsize(d["dtype"].removeprefix("torch.")) == d["itemsize"], d
        assert dtypes.itemsize(d["abbr"]) == d["itemsize"], d


def test_dtype_aliases_and_sizes():
    assert dtypes.itemsize("float") == dtypes.itemsize("torch.float32") == 4
    assert dtypes.itemsize("long") == 8 and dtypes.itemsize("half") == 2
    assert dtypes.itemsize("float128") is None and dtypes.itemsize(None) is None
    assert dtypes.nbytes(["128", "64"], "torch.bfloat16") == 128 * 64 * 2
    assert dtypes.nbytes([], "f32") == 4
    assert dtypes.nbytes(["s77", "64"], "f32") is None


@pytest.mark.parametrize(
    ("text", "arch_number"),
    [("sm_90", 90), ("sm90", 90), ("90", 90), ("sm_90a", 90), (" SM_80 ", 80), ("sm_120", 120)],
)
def test_gpu_arch_names(text, arch_number):
    assert arch.parse_arch(text) == arch_number
    assert arch.arch_name(arch_number) == f"sm_{arch_number}"


@pytest.mark.parametrize("text", ["cuda", "sm_9", "sm_1000", "gfx90a", "", "sm_90b"])
def test_not_gpu_arch_names(text):
    assert arch.parse_arch(text) is None


def test_the_parsers_import_no_torch():
    code = (
        "import sys\n"
        "import tcx.core.torchtext.arch, tcx.core.torchtext.dtypes, tcx.core.torchtext.fx_graph\n"
        "import tcx.core.torchtext.guards, tcx.core.torchtext.locations, tcx.core.torchtext.names\n"
        "import tcx.core.torchtext.output_code\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
