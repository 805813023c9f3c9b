"""The run model's fact families (core/model/): each built once and read by every view that shows
it, checked against real recordings and torch's own logs (the counts are what the views printed
before the family moved into the model: their JSON on every fixture was compared, unchanged)."""

from __future__ import annotations

import json

import pytest
from conftest import PROGRAMS, REPO, TRACE_FIXTURES, shared_run

from tcx.core.analysis.restarts import restarts
from tcx.core.ingest.recording import load_recording
from tcx.core.ingest.trace_log import load_trace
from tcx.core.model import build_model
from tcx.core.model.ranks import rank_models
from tcx.core.selection import whole_run
from tcx.core.selectors import compiles_with_kernel
from tcx.core.views import bytecode as bytecode_view
from tcx.core.views import cache as cache_view
from tcx.core.views import codegen as codegen_view
from tcx.core.views import cudagraphs as cudagraphs_view
from tcx.core.views import fusion as fusion_view
from tcx.core.views import graphs as graphs_view
from tcx.core.views import guards as guards_view
from tcx.core.views import index as index_view
from tcx.core.views import ranks as ranks_view
from tcx.core.views import recompiles as recompiles_view
from tcx.core.views import trace as trace_view
from tcx.tui import index as tui_index

INPUTS = TRACE_FIXTURES / "tlparse-tests" / "inputs"
SEED_F = REPO / "fixtures" / "recordings" / "seed_f_recompiles.tcx.gz"
NANO_TRAIN = REPO / "fixtures" / "recordings" / "nano_train_inductor.tcx.gz"
NANO_TRAIN_LOG = REPO / "fixtures" / "recordings" / "nano_train_inductor.torch_trace.log.gz"


# ----------------------------------------------------------------------------- guard sets


def test_a_logs_guard_trees_are_its_guards_events_each_parsed_the_same_for_every_view():
    model = build_model(load_trace(INPUTS / "cache_hit_miss.log"), "trace")
    sets = model.guard_sets
    assert sets.live == [] and sets.alive is None  # a log has no live guard lists
    # torch logged the two frames' trees three times (three runs of one program, one log)
    assert [t.compile_id for t in sets.trees] == ["0/0", "1/0"] * 3
    assert [len(t.guards()) for t in sets.trees] == [69, 97] * 3
    assert [(len(t.summary.tensors), len(t.summary.values)) for t in sets.trees] == [(11, 7), (11, 12)] * 3
    assert set(sets.tree_by_compile) == {"0/0", "1/0"}
    # the guards view lists each tree's leaves, the recompiles view compares their summaries
    doc = guards_view.to_json(guards_view.build_guards(model))
    assert [e["guard_count"] for e in doc["entries"]] == [69, 97] * 3
    assert {e["counted_as"] for e in doc["entries"]} == {"guard tree leaves"}
    report = recompiles_view.analyze(model)
    entries = [e for per in report.entries.values() for e in per]
    assert {e.compile_id: len(e.tensors) + len(e.value_guards) for e in entries} == {"0/0": 18, "1/0": 23}


def test_an_entrys_summary_holds_its_tensors_shape_guards_and_global_state():
    model = build_model(load_recording(SEED_F))
    trees = model.guard_sets.tree_by_compile
    assert sorted(trees) == ["0/0", "0/1", "0/2"]
    first, dynamic = trees["0/0"].summary, trees["0/1"].summary
    assert [t.arg for t in first.tensors] == ["x", "bias", "weight"]
    assert first.shape == [] and dynamic.shape == ["65 <= L['x'].size()[0] <= 4096"]
    assert first.state["grad_mode"] == "true" and len(first.state) == 11
    # the recompiles view's entries are those summaries, compared entry to entry
    report = recompiles_view.analyze(model)
    by_cid = {e.compile_id: e for per in report.entries.values() for e in per}
    assert by_cid["0/1"].shape_guards == dynamic.shape and by_cid["0/1"].tensors == dynamic.tensors
    assert trees["0/0"].summary is trees["0/0"].summary  # built once


def test_ranks_compare_guard_trees_by_one_fingerprint_across_processes():
    models = rank_models(build_model(load_trace(INPUTS / "multi_rank_logs"), "trace"))
    prints = {rank: {t.compile_id: t.fingerprint for t in m.guard_sets.trees} for rank, m in models.items()}
    assert {rank: len(p) for rank, p in prints.items()} == {0: 0, 1: 15, 2: 0, 3: 7}
    # ranks 1 and 3 compiled frames 0/0..0/6 with the same guards (object ids differ per process)
    assert all(prints[1][cid] == prints[3][cid] for cid in prints[3])
    assert len(set(prints[1].values())) == 15
    facts = ranks_view.facts_by_compile(models[3])
    assert {cid: f["guards"] for cid, f in facts.items() if f["guards"]} == prints[3]


@pytest.mark.torch
def test_a_live_runs_guard_lists_are_torchs_count_and_its_log_has_the_same_compiles(dynamo_recorded):
    run = dynamo_recorded("seed_f.py")
    model = build_model(load_recording(run.recording))
    sets = model.guard_sets
    counts = {cid: c.guard_count for cid, c in model.compiles.items() if c.guard_count is not None}
    assert sets.live and {s.compile_id: len(s.guards) for s in sets.live} == counts
    assert sets.alive == set(counts)  # every entry was still cached at the end
    # torch's own log of the same run: one tree per compile, guarding the same input tensors
    logged = build_model(load_trace(run.torch_trace), "trace").guard_sets.tree_by_compile
    assert set(logged) == set(counts)
    for s in sets.live:
        live_tensors = {g.source for g in s.guards if g.kind == "TENSOR_MATCH"}
        tree = logged[str(s.compile_id)]
        assert live_tensors == {g.source for g in tree.guards() if g.kind == "TENSOR_MATCH"}
        assert len(live_tensors) == len(tree.summary.tensors) == 3


# ----------------------------------------------------------------------------- generated code


@pytest.mark.parametrize("source", [NANO_TRAIN, NANO_TRAIN_LOG], ids=["recording", "torch_log"])
def test_generated_modules_list_each_kernel_once_for_every_view_that_counts_them(source):
    """tcx's recording of an Inductor training step and torch's own log of the same run: the same
    modules, kernels and provenance, and one count in the index, the ranks, codegen and --kernel."""
    model = build_model(load_recording(source) if source == NANO_TRAIN else load_trace(source), "recording")
    code = model.generated_code
    assert [m.compile_id for m in code.modules] == ["0/0", "0/1", "0/1"]  # forward; joint's forward, backward
    assert code.kernel_counts() == {"0/0": 10, "0/1": 19} and code.kernel_count == 29
    assert [tuple(map(len, m.provenance())) for m in code.modules] == [(5, 27), (5, 27), (1, 40)]
    assert {cid: len(maps) for cid, maps in code.provenance_by_compile().items()} == {"0/0": 1, "0/1": 2}
    assert index_view.kernel_counts(model, whole_run(model)) == code.kernel_counts()
    assert ranks_view.summarize({0: model})[0].kernels == 29
    view = codegen_view.build_codegen(model)
    assert view.kernel_count == 29 and [k.name for k in view.kernels] == [
        name for m in code.modules for name in m.kernel_names
    ]
    assert compiles_with_kernel(model, "cpp_fused") == {"0/0", "0/1"}
    assert compiles_with_kernel(model, "triton_") == set()


# ----------------------------------------------------------------------------- cache lookups


def test_cache_lookups_are_parsed_once_and_each_view_places_its_own_copy():
    model = build_model(load_trace(INPUTS / "cache_hit_miss.log"), "trace")
    logged = model.cache_lookups
    assert logged is model.cache_lookups  # parsed once, on first read
    assert [(lk.cache, lk.state) for lk in logged] == [
        ("fx_graph", "miss"),
        ("aotautograd", "bypass"),
        ("fx_graph", "hit"),
        ("aotautograd", "bypass"),
        ("fx_graph", "miss"),
        ("aotautograd", "bypass"),
    ]
    assert all(lk.components for lk in logged if lk.cache == "fx_graph")  # the key's parts, parsed
    # the run facts' counts (tcx diff, baselines) and the cache view read the same lookups
    assert cache_view.cache_counts(model) == {"fx_graph": {"miss": 2, "hit": 1}, "aotautograd": {"bypass": 3}}
    alone = cache_view.build_cache(model)
    assert (alone.cache_lookup_count, alone.cache_hit_count, alone.cache_miss_count) == (6, 1, 5)
    # a comparison explains each lookup on the view's copy: the model's lookups stay as torch logged them
    compared = cache_view.build_cache(model, earlier=((model, whole_run(model)),))
    assert any(lk.why for lk in compared.runs[1].lookups)
    assert not any(hasattr(lk, "why") for lk in logged)
    assert cache_view.to_json(cache_view.build_cache(model)) == cache_view.to_json(alone)
    # torch's compilation_metrics: this torch's config did not say whether the caches were off
    assert [(m.compile_id, m.caches_disabled) for m in model.cache_metrics] == [
        ("0/0", None),
        ("1/0", None),
    ] * 3
    assert alone.runs[0].caches_disabled is None


def test_cache_metrics_say_what_torchs_compiler_config_did_with_the_caches():
    cold = build_model(load_trace(TRACE_FIXTURES / "tcx-cache" / "cold.log.gz"), "trace")
    assert [(m.compile_id, m.remote, m.caches_disabled) for m in cold.cache_metrics] == [("0/0", {}, False)]
    assert cache_view.build_cache(cold).runs[0].caches_disabled is False
    trained = build_model(load_recording(NANO_TRAIN))  # recorded with a fresh cache folder, caches on
    assert [m.caches_disabled for m in trained.cache_metrics] == [False, False]


# ----------------------------------------------------------------------------- graphs by stage


@pytest.mark.parametrize("source", [NANO_TRAIN, NANO_TRAIN_LOG], ids=["recording", "torch_log"])
def test_each_compiles_graphs_by_stage_are_one_family_for_the_graphs_view_and_the_tui(source):
    """An Inductor training step: the eval forward compiled for inference, the train step for
    training (joint, forward, backward and their post-grad graphs), in tcx's recording and in
    torch's own log of the same run."""
    model = build_model(load_recording(source) if source == NANO_TRAIN else load_trace(source), "recording")
    graphs = model.graphs
    assert {cid: list(texts) for cid, texts in graphs.texts.items()} == {
        "0/0": ["dynamo", "inference", "post_grad_inference"],
        "0/1": ["dynamo", "joint", "forward", "backward", "post_grad_forward", "post_grad_backward"],
    }
    assert graphs.logged == {
        "0/0": {"dynamo", "inference", "post_grad"},
        "0/1": {"dynamo", "joint", "forward", "backward", "post_grad"},
    }
    assert all(text.startswith("class ") or "def forward" in text for text in graphs.texts["0/1"].values())
    view = graphs_view.build_graphs(model)
    assert [c.graphs for c in view.compiles] == list(graphs.texts.values())
    assert view.compiles[1].training and view.compiles[1].saved  # read from the family's texts
    assert tui_index._graph_kinds(model, model.compiles) == graphs.logged
    # the codegen view names a kernel's post-grad nodes from the same graphs (forward, then backward)
    assert {cid: len(texts) for cid, texts in graphs.post_grad.items()} == {"0/0": 1, "0/1": 2}
    post_grad = codegen_view.PostGradNodes(model)
    assert post_grad.module("0/1", 1) and set(post_grad.module("0/1", 1)) <= set(post_grad.of("0/1"))


# ----------------------------------------------------------------------------- fusion decisions


@pytest.mark.torch
@pytest.mark.inductor
def test_fusion_decisions_per_scheduled_graph_are_read_once_for_the_view_and_the_tui(recorded):
    """The session's Inductor recording of seed_f (forward and backward): one scheduled graph each,
    the fusion view's graphs are those graphs, its fused pairs their `fuse` decisions."""
    model = build_model(load_recording(recorded("seed_f").recording))
    scheduled = model.fusion
    assert [(g.compile_id, g.graph, g.preview) for g in scheduled] == [
        ("0/0", "forward", False),
        ("0/0", "backward", False),
    ]
    assert all(g.nodes and g.groups for g in scheduled)
    view = fusion_view.build_fusion(model)
    assert [(g.compile_id, g.graph) for g in view.graphs] == [(g.compile_id, g.graph) for g in scheduled]
    for shown, logged in zip(view.graphs, scheduled, strict=True):
        fused = {(d["node1"], d["node2"]) for d in logged.decisions if d.get("kind") == "fuse"}
        assert set(shown.fused_pairs) == fused and len(shown.nodes) == len(logged.nodes)
    index = tui_index.build_index(model, whole_run(model))
    fusion_stages = [item for item in index.items.values() if item.detail.view == "fusion"]
    assert [item.detail.compile_ids for item in fusion_stages] == [("0/0",)]  # the compile's fusion stage


# ----------------------------------------------------------------------------- bytecode pairs


@pytest.mark.torch
def test_bytecode_pairs_of_a_recording_and_of_torchs_log_of_the_same_run(dynamo_recorded):
    """demo.py's frames: torch logs the resume functions' bytecode, tcx records every compiled frame's;
    where both have a frame, the same calls to compiled graphs and resume functions and the same
    original instructions (torch's dis text parsed)."""
    run = dynamo_recorded("demo.py")
    recorded_pairs = {
        (p.compile_id, p.function): p for p in build_model(load_recording(run.recording)).bytecode
    }
    logged_pairs = build_model(load_trace(run.torch_trace), "trace").bytecode
    assert logged_pairs and all(p.function.startswith("torch_dynamo_resume_in_g") for p in logged_pairs)
    assert len(recorded_pairs) > len(logged_pairs)
    for logged in logged_pairs:
        mine = recorded_pairs[(logged.compile_id, logged.function)]
        assert mine.called == logged.called and logged.transformed
        assert [r["opname"] for r in mine.original] == [r["opname"] for r in logged.original]
    model = build_model(load_recording(run.recording))
    view = bytecode_view.build_bytecode(model)
    assert all(
        f.pair is p for f, p in zip(view.frames, model.bytecode, strict=True)
    )  # the model's, not copies
    kinds = {c["kind"] for f in view.frames for c in f.calls}
    assert kinds == {"graph", "resume"} and all(
        len(f.calls) == len(p.called) for f, p in zip(view.frames, model.bytecode, strict=True)
    )


# ----------------------------------------------------------------------------- CUDA-graph decisions


def test_cuda_graph_decisions_per_graph_of_a_real_h200_run():
    """A reduce-overhead run on an H200 (fixtures/gpu): five inference graphs, each partitioned and
    decided; two captured, one skipped (torch's reason), one wrapped, one split into partitions."""
    model = build_model(load_recording(REPO / "fixtures" / "gpu" / "h200_cudagraphs_real.tcx"))
    decisions = model.cudagraphs
    assert len(decisions.compile_ids) == 19  # every cudagraph event, the run's own ones too
    assert [(g.compile_id, g.captured, len(g.skips)) for g in decisions.graphs] == [
        ("0/0", 1, 0),
        ("1/0", 0, 1),
        ("2/0", 1, 0),
        ("3/0", 0, 0),
        ("4/0", 0, 0),
    ]
    assert all(g.graph == "inference" and g.partitions and g.decided and g.wrapped for g in decisions.graphs)
    view = cudagraphs_view.build_cudagraphs(model)
    assert [(g.compile_id, g.status, g.captured) for g in view.graphs] == [
        ("0/0", "captured", 1),
        ("1/0", "skipped", 0),
        ("2/0", "captured", 1),
        ("3/0", "wrapped", 0),
        ("4/0", "partly", 0),
    ]


# ----------------------------------------------------------------------------- per-rank facts


def test_each_ranks_progress_and_compared_facts_come_from_its_own_model():
    """tlparse's four rank logs: ranks 0 and 2 logged one compile, ranks 1 and 3 fifteen and seven;
    the hang report's last events and the divergence's compared facts read the same facts."""
    models = rank_models(build_model(load_trace(INPUTS / "multi_rank_logs"), "trace"))
    progress = {rank: m.rank_progress(rank) for rank, m in models.items()}
    assert {rank: (p.events, p.last_compile_id, p.last_name) for rank, p in progress.items()} == {
        0: (21, "0/0", "compilation_metrics"),
        1: (810, "0/14", "compilation_metrics"),
        2: (21, "0/0", "compilation_metrics"),
        3: (299, "0/6", "compilation_metrics"),
    }
    assert [(e.rank, e.compile_id, e.events) for e in ranks_view.last_events(models)] == [
        (rank, p.last_compile_id, p.events) for rank, p in progress.items()
    ]
    traces = models[3].compile_traces
    assert len(traces) == 7 and all(t.shapes is not None and len(t.cache) == 2 for t in traces.values())
    facts = ranks_view.facts_by_compile(models[3])
    assert all(
        facts[cid]["cache"] == t.cache and facts[cid]["shapes"] == t.shapes for cid, t in traces.items()
    )


# ----------------------------------------------------------------------------- traced instructions


@pytest.mark.torch
def test_traced_instructions_per_compile_attempt_are_what_the_trace_view_shows():
    """`tcx trace demo.py` (eager): each compile's traced instructions, its graph break among them."""
    run = shared_run(
        "trace", str(PROGRAMS / "demo.py"), "--backend", "eager", "--format", "json", save=True
    ).ok()
    model = build_model(load_recording(run.recording))
    traced = model.traced
    assert traced and all(t.instructions and t.elided == 0 for t in traced)
    assert [c["compile_id"] for c in run.json()["compiles"]] == [t.compile_id for t in traced]
    view = trace_view.build_trace(model)
    assert [len(c.instructions) for c in view.compiles] == [len(t.instructions) for t in traced]
    breaks = [t.compile_id for t in traced if any(r.get("graph_break") for r in t.instructions)]
    assert breaks and breaks == [c.frame.compile_id for c in view.compiles if c.graph_break]
    assert all(c.frame is t for c, t in zip(view.compiles, traced, strict=True))  # the model's, not copies


# ----------------------------------------------------------------------------- attempt logs


def test_each_compile_attempt_says_what_made_torch_trace_again():
    """demo.py's saved run: four compiles whose first attempt broke the graph with no graph made, and
    traced again to compile the part before the break (the second attempt made the graph)."""
    model = build_model(load_recording(REPO / "fixtures" / "recordings" / "demo_explain.tcx.gz"))
    logs = model.attempt_logs
    abandoned = [(r.compile_id, r.attempt, r.kind, r.graphs) for r in restarts(model)]
    assert abandoned == [(cid, 0, "graph break", 0) for cid in ("1/0", "2/0", "2/1", "2/2")]
    for cid, attempt, _, graphs in abandoned:
        assert logs[(cid, attempt)].broke and logs[(cid, attempt)].graphs == graphs
    assert all(logs[(cid, 1)].graphs == 1 for cid in ("2/0", "2/1", "2/2"))
    # compiles 3/1 and 3/2 traced a Python float as a symbol and kept it (not specialized: no restart)
    traced_floats = {key: log.floats for key, log in logs.items() if log.floats or log.specialized}
    assert traced_floats == {("3/1", 0): {"zf2": "___stack0"}, ("3/2", 0): {"zf2": "___stack0"}}


# ------------------------------------------------- the families that replaced the last raw reads


def test_each_compiles_timed_steps_are_its_chromium_events_and_fill_its_phases():
    from tcx.core.analysis.compile_phases import compile_times

    model = build_model(load_recording(SEED_F))
    steps = model.chromium_steps()
    assert {cid: len(s) for cid, s in steps.items()} == {"0/0": 175, "0/1": 168, "0/2": 168}
    # each begin or end torch logged inside a compile (not its instant events, not a step outside)
    raw = [ev for ev in model.raw_trace_events() if ev.name == "chromium_event"]
    marks = [ev for ev in raw if ev.compile_id and json.loads(ev.payload or "{}").get("ph") in ("B", "E")]
    assert sum(map(len, steps.values())) == len(marks) == 511 < len(raw)
    times = compile_times(model)
    phases = ["Dynamo", "AOTAutograd", "cache key and lookup", "Inductor lowering", "codegen"]
    phases += ["C++/Triton compile", "load compiled code"]  # every phase of an Inductor compile
    assert {cid: sorted(t.phases) for cid, t in times.items()} == {cid: sorted(phases) for cid in steps}


def test_shape_facts_and_promotions_of_the_seed_functions_recompile():
    """seed f recompiled for x=[256,32]: torch made x.size(0) the symbol s77 (a promotion, guarded by
    the program's `if x.shape[0] > 64`), and 0/2 reused the symbol (no second promotion)."""
    model = build_model(load_recording(SEED_F))
    assert {cid: list(s.symbols.values()) for cid, s in model.shapes.items()} == {
        "0/1": [("s77", "256")],
        "0/2": [("s77", "32")],
    }
    promotions = model.promotions()
    assert list(promotions) == ["0/1"]
    (p,) = promotions["0/1"]
    assert (p.arg, p.dim, p.symbol, p.value) == ("x", 0, "s77", "256")
    assert {"expr": "s77 > 64", "line": 12, "code": "if x.shape[0] > 64:"} in p.guards
    assert model.promotions() is not promotions  # fresh objects: the view attaches what each replaced
    assert all(model.marked_dynamic(cid) == set() for cid in model.compiles)  # the program marked none


def test_the_per_call_records_are_the_recompiles_views_calls():
    model = build_model(load_recording(SEED_F))
    captured = model.call_captures
    assert [e["outcome"] for e in captured.frame_calls] == ["compile", "hit", "recompile", "recompile"]
    assert (len(captured.guard_checks), len(captured.configs), captured.what_ifs) == (2, 1, [])
    report = recompiles_view.analyze(model)
    assert [c.outcome for c in report.calls] == ["compile", "hit", "recompile", "recompile"]
    log = build_model(load_trace(NANO_TRAIN_LOG), "trace")
    assert log.call_captures.frame_calls == [] and recompiles_view.analyze(log).live is False


def test_the_cost_capture_is_what_tcx_cost_measured_and_a_log_has_none():
    from tcx.core.cost.measurements import has_cost, read_measurements
    from tcx.core.model.cost_capture import COST_EVENTS

    model = build_model(load_recording(NANO_TRAIN))
    capture = model.cost_capture
    assert capture.configured and has_cost(model) and not capture.on_cuda
    kinds = [e["kind"] for e in capture.events]
    assert kinds == sorted(kinds, key=COST_EVENTS.index) and "cost_run_end" not in kinds
    measured = read_measurements(model)
    assert len(measured.calls) == 40 and [r.run for r in measured.runs] == [0, 1]
    copied = capture.copied("cost_call", ("index", "wall_ns"), needs="wall_ns")
    assert [c["index"] for c in copied] == [c.index for c in measured.calls]
    assert all(set(c) == {"index", "wall_ns"} for c in copied)
    log = build_model(load_trace(NANO_TRAIN_LOG), "trace")
    assert not log.cost_capture.configured and log.cost_capture.events == []


def test_payload_sizes_come_from_the_reference_without_reading_a_payload_left_on_disk():
    log = build_model(load_trace(NANO_TRAIN_LOG), "trace")  # read lazily: payloads stay on disk
    sizes = log.payload_sizes("inductor_output_code")
    assert [s.compile_id for s in sizes] == ["0/0", "0/1", "0/1"]  # 0/1: its forward and backward
    assert all(s.lines is None and s.compressed_bytes == 0 and s.disk_bytes > 1000 for s in sizes)
    model = build_model(load_recording(SEED_F))
    graphs = [ev for ev in model.raw_trace_events() if ev.name == "dynamo_output_graph"]
    sizes = model.payload_sizes("dynamo_output_graph")
    assert len(sizes) == len(graphs) == 3
    for size, ev in zip(sizes, graphs, strict=True):
        text = ev.payload or ""
        assert size.lines == text.count("\n") + 1 or size.compressed_bytes > 0


def test_every_graph_of_a_compile_is_kept_in_log_order_for_the_cache_view():
    log = build_model(load_trace(NANO_TRAIN_LOG), "trace")
    every = log.graphs.every
    assert [name for name, _ in every["0/1"]] == [
        "dynamo_output_graph",
        "aot_joint_graph",
        "aot_forward_graph",
        "aot_backward_graph",
        "artifact:inductor_post_grad_graph",
        "artifact:inductor_post_grad_graph",
    ]
    # the first of each stage is the one the graphs view shows
    first = dict(reversed(every["0/1"]))
    assert first["aot_forward_graph"].text == log.graphs.texts["0/1"]["forward"]
