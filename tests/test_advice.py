"""Advice that is right for the program: the reason torch logged, and no remedy the program already uses.

Two programs written for tcx, each recorded once:
- models/fast_decode.py (gpt-fast-like, Inductor as the program asks): prefill compiled with
  dynamic=True whose prompt length shares its symbol with `freqs_cis.size(1)` (duck sizing) until
  a `view` specializes it; a KV cache allocated per call; a restart; decode under reduce-overhead
  on the CPU; kernels the wrapper launches twice;
- models/nano_train_eval.py (nanoGPT-like, `--backend eager`: the point is Dynamo's guards): a train
  step and a torch.no_grad() evaluation of one compiled model, two entries differing in grad mode.

The truth is torch's own TORCH_TRACE log of the same run, read by conftest's tiny reader.
"""

from __future__ import annotations

import json
import re

import pytest
from conftest import PROGRAMS, REPO, run_tcx, shared_run, torch_trace_records

pytestmark = [pytest.mark.torch]

ENV = {"NO_COLOR": "1", "COLUMNS": "120", "FORCE_COLOR": "", "TERM": "dumb"}


def tcx(*args: str, env: dict[str, str] | None = None) -> str:
    proc = run_tcx(*args, env={**ENV, **(env or {})}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def tcx_json(*args: str) -> dict:
    return json.loads(tcx(*args, "--format", "json"))


def user_name(source: str) -> str:
    """torch's source as a user names it: L['x'].size()[1] -> x.size(1) (written here, not tcx's)."""
    text = re.sub(r"^L\['([^']+)'\]", r"\1", source)
    return re.sub(r"\.size\(\)\[(\d+)\]$", r".size(\1)", text)


def first_reason(payload: str) -> str:
    """The first entry's failing guard in torch's recompile_reasons (a JSON list for several)."""
    try:
        value = json.loads(payload)
    except ValueError:
        return payload.split("\n")[0]
    return str(value[0] if isinstance(value, list) else value)


def last_attempts(records: list) -> dict[str, int]:
    out: dict[str, int] = {}
    for _, md, _ in records:
        if "frame_id" in md and "frame_compile_id" in md:
            cid = f"{md['frame_id']}/{md['frame_compile_id']}"
            out[cid] = max(out.get(cid, 0), md.get("attempt") or 0)
    return out


@pytest.fixture(scope="module")
def decode(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fast_decode")
    tcx(
        "report",
        str(PROGRAMS / "models" / "fast_decode.py"),
        "--save",
        str(tmp / "run.tcx"),
        "--format",
        "json",
        "-o",
        str(tmp / "report.json"),
        env={"TORCH_TRACE": str(tmp / "trace")},
    )
    return tmp / "run.tcx", torch_trace_records(tmp / "trace")


@pytest.fixture(scope="module")
def nano():
    """The session's `tcx recompiles nano_train_eval.py --backend eager` run (tests/test_advice_real.py
    reads the same one), saved, with torch's log of it."""
    program = str(PROGRAMS / "models" / "nano_train_eval.py")
    eager = ("--backend", "eager")
    run = shared_run("recompiles", program, *eager, "--format", "json", save=True, trace=True).ok()
    return run.recording, run.json(), torch_trace_records(run.torch_trace)


# ------------------------------------------------------------------ fast_decode (Inductor)


def test_prefill_recompile_names_duck_sizing_and_the_line_not_dynamic_true(decode):
    recording, records = decode
    last = last_attempts(records)
    # torch: in prefill's first entry, the prompt length shared one symbol with freqs_cis.size(1)
    # and a guard at a user line specialized it
    [spec] = [
        md["symbolic_shape_specialization"]
        for name, md, _ in records
        if name == "symbolic_shape_specialization"
        and (md["frame_id"], md["frame_compile_id"]) == (0, 0)
        and md["attempt"] == last["0/0"]
        and "L['x'].size()[1]" in md["symbolic_shape_specialization"]["sources"]
    ]
    symbol, value = spec["symbol"], spec["value"]
    line = spec["user_stack"][-1]["line"]
    partner = "L['model'].freqs_cis.size()[1]"
    assert partner in spec["sources"]
    doc = tcx_json("recompiles", str(recording))
    [call] = [c for c in doc["calls"] if c["outcome"] == "recompile" and c["compile_id"] == "0/1"]
    assert call["failed_guards"][0]["arg"] == "x" and call["failed_guards"][0]["dim"] == 1
    remedy = call["remedy"]
    assert call["cause"] == "size specialized through duck sizing"
    assert "duck sizing" in remedy and f"Eq({symbol}, {value})" in remedy
    assert f"fast_decode.py:{line}" in remedy and f"`{user_name(partner)}`" in remedy
    assert "torch._dynamo.mark_static(model.freqs_cis, 1)" in remedy
    # prefill is compiled with dynamic=True: never advise it, nor marking the prompt dynamic
    assert "compile with dynamic=True" not in remedy and "mark_dynamic(x" not in remedy


def test_kv_cache_recompiles_advise_allocating_once_not_mark_dynamic(decode):
    recording, records = decode
    torch_says = {
        f"{md['frame_id']}/{md['frame_compile_id']}": payload
        for name, md, payload in records
        if name == "artifact" and md["artifact"]["name"] == "recompile_reasons"
    }
    buffer_recompiles = {cid for cid, text in torch_says.items() if "_buffers['k']" in first_reason(text)}
    assert len(buffer_recompiles) == 2  # prefill and decode, when the third call resizes the cache
    doc = tcx_json("recompiles", str(recording))
    calls = {c["compile_id"]: c for c in doc["calls"] if c["outcome"] == "recompile"}
    for cid in buffer_recompiles:
        remedy = calls[cid]["remedy"]
        assert calls[cid]["cause"] == "buffer reallocated with a new size"
        assert "Allocate the KV cache once at its largest size" in remedy
        assert "force_parameter_static_shapes" in remedy
        assert "torch._dynamo.mark_dynamic(" not in remedy and "compile with dynamic=True" not in remedy


def test_restart_says_torchs_reason_in_trace_and_explain(decode):
    recording, records = decode
    [metrics] = [
        md["compilation_metrics"]
        for name, md, _ in records
        if name == "compilation_metrics" and (md["frame_id"], md["frame_compile_id"]) == (0, 0)
    ]
    assert any("TensorifyScalarRestartAnalysis" in r for r in metrics["restart_reasons"])
    floats = [
        md["create_symbol"]["source"]
        for name, md, _ in records
        if name == "create_symbol"
        and (md["frame_id"], md["frame_compile_id"], md["attempt"]) == (0, 0, 0)
        and md["create_symbol"]["symbol"].startswith("zf")
    ]
    assert floats == ["L['model']._modules['embed'].norm_type"]
    explained = tcx_json("explain", str(recording))
    [restart] = explained["restarts"]
    assert (restart["compile_id"], restart["attempt"], restart["kind"]) == (
        "0/0",
        0,
        "TensorifyScalarRestartAnalysis",
    )
    assert "`model._modules['embed'].norm_type`" in restart["reason"]
    assert "_tensorify_python_scalars" in restart["reason"]
    graphs = sum(
        1
        for name, md, _ in records
        if name == "dynamo_output_graph"
        and (md["frame_id"], md["frame_compile_id"], md["attempt"]) == (0, 0, 0)
    )
    assert restart["graphs"] == graphs == 1
    text = tcx("explain", str(recording))
    assert "restarted 0/0 prefill (attempt 0 thrown away" in text
    trace = tcx_json("trace", str(recording), "--compile", "0/0")
    first = next(c for c in trace["compiles"] if c["attempt"] == 0)
    assert first["restarted"] and first["restart_reason"] == restart["reason"]
    trace_text = " ".join(tcx("trace", str(recording), "--compile", "0/0").split())
    assert (
        "restarted: traced again as the next attempt, because Inductor's _tensorify_python_scalars"
        in trace_text
    )


def test_cudagraphs_tells_not_requested_from_requested_on_the_cpu(decode):
    recording, records = decode
    names = {
        f"{md['frame_id']}/{md['frame_compile_id']}": md["compilation_metrics"]["co_name"]
        for name, md, _ in records
        if name == "compilation_metrics"
    }
    doc = tcx_json("cudagraphs", str(recording))
    status = {g["compile_id"]: g["status"] for g in doc["graphs"]}
    assert set(status) == set(names)
    for cid, fn in names.items():
        # decode_one_token is compiled with mode="reduce-overhead", prefill without
        assert status[cid] == ("on the CPU" if fn == "decode_one_token" else "not requested"), cid
    assert doc["unavailable"] is None
    text = tcx("cudagraphs", str(recording))
    assert "requested (reduce-overhead), but the graph runs on the CPU" in text
    assert "no graph was compiled with CUDA graphs" not in text


def test_fusion_tells_a_reused_kernel_from_a_combined_one(decode):
    recording, records = decode
    last = last_attempts(records)
    [code] = [
        payload
        for name, md, payload in records
        if name == "inductor_output_code"
        and (md["frame_id"], md["frame_compile_id"]) == (0, 0)
        and md["attempt"] == last["0/0"]
    ]
    body = code[code.rindex("def call(") :]
    launches: dict[str, int] = {}
    for m in re.finditer(r"^\s+(cpp_fused_\w+)\(", body, re.M):
        launches[m.group(1)] = launches.get(m.group(1), 0) + 1
    twice = {k for k, n in launches.items() if n > 1}
    assert twice  # the two layers' identical kernels, e.g. the MLP's silu
    doc = tcx_json("fusion", str(recording), "--compile", "0/0")
    [graph] = doc["graphs"]
    uses = {u["kernel"]: u for u in graph["kernel_uses"]}
    assert {k for k, u in uses.items() if u["kind"] == "reused"} == twice
    for kernel in twice:
        assert len(uses[kernel]["launches"]) == launches[kernel]
        assert uses[kernel]["text"].startswith("kernel reused for ")
    for kernel, use in uses.items():
        if use["kind"] == "combined":
            assert launches[kernel] == 1
    text = " ".join(tcx("fusion", str(recording), "--compile", "0/0").split())
    for kernel in twice:
        assert f"{kernel} kernel reused for" in text
        assert f"{kernel} holds groups" not in text


# ------------------------------------------------------------------ nano_train_eval (eager backend)


def grad_mode_of(payload: str) -> tuple[str, dict]:
    """(grad_mode, the rest of the global state) from torch's GLOBAL_STATE guard, read here."""
    m = re.search(r"GLOBAL_STATE: ___check_global_state\(\) against (\{.*\})", payload)
    assert m, "torch's guard tree has a GLOBAL_STATE guard"
    state = json.loads(m.group(1))
    return json.dumps(state.pop("grad_mode")), state


def test_two_entries_of_one_frame_show_their_difference_first(nano):
    save, doc, records = nano
    trees = {
        f"{md['frame_id']}/{md['frame_compile_id']}": payload
        for name, md, payload in records
        if name == "dynamo_cpp_guards_str"
    }
    assert set(trees) == {"0/0", "0/1"}
    (mode0, rest0), (mode1, rest1) = grad_mode_of(trees["0/0"]), grad_mode_of(trees["0/1"])
    assert mode0 != mode1 and rest0 == rest1  # torch: only grad mode differs
    first, second = doc["entries"]["forward"]
    assert second["differs_from"] == first["compile_id"] == "0/0"
    assert second["differences"] == [f"grad_mode: {mode0} → {mode1}"]
    [recompile] = [c for c in doc["calls"] if c["outcome"] == "recompile"]
    assert recompile["remedy"].startswith("Only grad mode differs from entry 0/0")
    lines = tcx("recompiles", str(save)).splitlines()
    head = next(i for i, ln in enumerate(lines) if ln.strip().startswith("[0/1]"))
    assert lines[head + 1].strip() == f"differs from [0/0]: grad_mode: {mode0} → {mode1}"


def test_a_shortened_entry_says_how_many_lines_it_left_out_and_how_to_see_them(nano):
    save, doc, _ = nano
    entry = doc["entries"]["forward"][0]
    hidden = len(entry["guards"]) - 8
    assert hidden > 0
    text = tcx("recompiles", str(save))
    assert f"… {hidden} more guard lines (--all shows every line)" in text
    full = tcx("recompiles", str(save), "--all", "--width", "1000")  # no line wraps
    assert "more guard lines" not in full
    assert all(line in full for line in entry["guards"])


def test_guard_group_of_a_module_is_not_labelled_with_one_of_its_tensors(nano):
    save, _, records = nano
    tree = next(payload for name, _, payload in records if name == "dynamo_cpp_guards_str")
    assert "TENSOR_MATCH" in tree and "L['self']._modules" in tree  # torch guards the module's tensors
    doc = tcx_json("guards", str(save), "--compile", "0/0")
    [entry] = doc["entries"]
    modules = [g for g in entry["groups"] if g["category"] == "module/object"]
    tensor_groups = [g for g in modules if any(x["kind"] == "TENSOR_MATCH" for x in g["guards"])]
    assert tensor_groups
    for group in tensor_groups:
        tensors = sum(x["kind"] == "TENSOR_MATCH" for x in group["guards"])
        assert group["summary"] == f"({tensors} of its tensors guarded below)"
    text = tcx("guards", str(save), "--compile", "0/0")
    assert not re.search(r"module/object \S+\s+(Parameter|Tensor) ", text)


def test_cudagraphs_requested_and_skipped_says_why():
    """A real H200 run (fixtures/gpu, kept from bench/gpu_compare.py): the graph whose input is
    mutated was requested and skipped, with torch's reason and line under it."""
    recording = str(REPO / "fixtures" / "gpu" / "h200_cudagraphs_real.tcx")
    # that program ended with an exception after its graphs ran: exit 3, everything still shown
    proc = run_tcx("cudagraphs", recording, "--format", "json", env=ENV)
    assert proc.returncode == 3, proc.stderr
    skipped = [g for g in json.loads(proc.stdout)["graphs"] if g["status"] == "skipped"]
    assert [g["compile_id"] for g in skipped] == ["1/0"] and skipped[0]["reasons"]
    lines = run_tcx("cudagraphs", recording, "--width", "1000", env=ENV).stdout.splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("compile 1/0"))
    assert "requested (reduce-overhead) and skipped" in lines[at]
    assert lines[at + 1].strip().startswith("mutated inputs: mutated inputs (1 instances)")
