"""The real-model corpus: HF transformers architectures from tiny random configs (no download), each
run once by `tcx explain` with TORCH_TRACE set, so tcx's counts and torch's own log come from the
very same run; every count tcx reports equals what torch's log says.

fixtures/programs/models/ holds the programs; each says in its docstring what it exercises and why
it uses the backend it writes. Two more architectures are checked elsewhere against torch's log of
the same run: Llama (models/tiny_llama.py, tests/test_zoo_counts.py) and BERT with labels
(models/bert_labels.py, below, from the recording tests/test_advice_real.py shares).

torch's log is read by the suite's independent reader (conftest.py `read_torch_trace`): a graph is
a `dynamo_output_graph` record, a break a `dynamo_graph_break_reason` artifact, a recompile a
`recompile_reasons` artifact, a compile a `dynamo_start`, a failed frame a `compilation_metrics`
with a `fail_type`. It keys a distinct break site by the "Graph break in user code at FILE:LINE"
line and the first line of the reason; tcx keys one by (type, file, line), so the two agree where
one location has one type, as in every program here.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from conftest import (
    PROGRAMS,
    TorchTrace,
    plain_trace,
    read_torch_trace,
    run_tcx,
    shared_run,
    torch_trace_records,
)

pytestmark = pytest.mark.torch

# program -> what torch's log shows of it on torch 2.13 + transformers 5: a pin that keeps each program
# doing what its docstring says (a program that stopped recompiling or breaking would still "agree
# with torch" and test nothing). ViT is the one that runs Inductor (marked so).
CORPUS = {
    "models/hf_gpt2_generate.py": "recompiles",
    "models/hf_t5_train.py": "one graph",
    "models/hf_mistral_train.py": "one graph",
    "models/hf_roberta_mlm.py": "recompiles",
    "models/hf_vit_classify.py": "one graph",
    "models/hf_qwen2_moe_train.py": "breaks",
}
# models/hf_whisper_encode.py (one aot_eager graph, like T5's) is left to bench/advice.py's sweep, which
# takes every program under models/: the suite's corpus keeps to ~170 CPU-seconds on 2 cores.
# Programs also run plainly (`python prog.py` under TORCH_TRACE, no tcx): tcx changes no count.
PLAIN = ("models/hf_gpt2_generate.py", "models/hf_qwen2_moe_train.py")


def explain_run(name: str) -> tuple[dict, TorchTrace]:
    """The session's one `tcx explain PROGRAM --format json` run with TORCH_TRACE set (and its recording
    saved: tests/test_advice_real.py reads the MoE's)."""
    run = shared_run("explain", str(PROGRAMS / name), "--format", "json", save=True, trace=True).ok()
    return run.json(), read_torch_trace(run.torch_trace)


def counts(doc: dict) -> dict[str, int]:
    return {
        "graphs": doc["graph_count"],
        "breaks": doc["graph_break_count"],
        "sites": doc["unique_graph_break_count"],
        "recompiles": doc["recompile_count"],
        "compiles": doc["compile_count"],
        "failed": doc["failed_frame_count"],
    }


def torch_counts(trace: TorchTrace) -> dict[str, int]:
    return {
        "graphs": trace.graphs,
        "breaks": trace.graph_breaks,
        "sites": len(trace.break_sites),
        "recompiles": trace.recompiles,
        "compiles": len(trace.compile_ids),
        "failed": len(trace.failed),
    }


@pytest.mark.parametrize(
    "name",
    [
        pytest.param(n, marks=[pytest.mark.inductor] if n == "models/hf_vit_classify.py" else [])
        for n in sorted(CORPUS)
    ],
)
def test_every_count_equals_torchs_own_log_of_the_same_run(name: str) -> None:
    doc, trace = explain_run(name)
    assert doc["schema"] == "tcx.explain/1" and doc["source_kind"] == "live"
    assert counts(doc) == torch_counts(trace), name
    assert sum(site["occurrences"] for site in doc["graph_breaks"]) == trace.graph_breaks
    for site in doc["graph_breaks"]:
        assert site["file"] and site["line"], site  # every site where torch names it
    what = CORPUS[name]
    if what == "one graph":
        assert (trace.graphs, trace.graph_breaks, trace.recompiles) == (1, 0, 0), name
    elif what == "recompiles":
        assert trace.recompiles >= 1 and trace.graph_breaks == 0, name
    else:
        assert trace.graph_breaks > len(trace.break_sites) >= 1, name


@pytest.mark.parametrize("name", PLAIN)
def test_tcx_changes_no_count_of_the_programs_own_run(name: str) -> None:
    doc, _ = explain_run(name)
    assert counts(doc) == torch_counts(plain_trace(name)), name


def test_bert_trained_with_labels_counts_equal_torchs_log() -> None:
    """The recording tests/test_advice_real.py makes of bert_labels.py (same command, so one run per
    session), rendered by explain: the recompile transformers' first call causes, as torch logs it."""
    run = shared_run(
        "recompiles",
        str(PROGRAMS / "models" / "bert_labels.py"),
        "--backend",
        "eager",
        "--format",
        "json",
        save=True,
        trace=True,
    ).ok()
    doc = shared_run("explain", str(run.recording), "--format", "json").ok().json()
    trace = read_torch_trace(run.torch_trace)
    assert counts(doc) == torch_counts(trace)
    assert trace.recompiles == 1 and trace.graph_breaks == 0


def test_generate_recompiles_from_prefill_to_decode_as_torch_logs() -> None:
    """generate() calls the compiled forward for the prompt, then once per new token: torch's log
    and tcx agree on the recompiles, and tcx names the compiled frame (GPT-2's forward)."""
    doc, trace = explain_run("models/hf_gpt2_generate.py")
    assert doc["recompile_count"] == trace.recompiles == 2
    assert doc["graph_count"] == trace.graphs == 3


# ------------------------------------------------------------------ break sites torch names
#
# A backend failure ("Backend compiler exception", GB0219) makes two records of one compile: torch's
# "WON'T CONVERT <function> <file> line <n>" warning and the break, whose header names the same frame
# ("Graph break in user code at <file>:<n>"). The MoE of issue 35 failed so under Inductor with an older
# transformers; on torch 2.13 + transformers 5 it does not (models/hf_qwen2_moe_train.py breaks but
# compiles what it captures), so a small real program makes the failure: backend_failure.py, and
# tests/data/corpus/torch2.13_backend_failure.log.gz is torch's log of `python backend_failure.py`.
# conftest's reader cannot count these sites: it takes a reason after "Graph Break Reason:", which a
# WON'T CONVERT record has not (IndexError); the reader below keys a site by the location torch names.

BACKEND_FAILURE = "backend_failure.py"
BACKEND_FAILURE_LOG = Path(__file__).parent / "data" / "corpus" / "torch2.13_backend_failure.log.gz"
_NAMED = re.compile(r"^(?:Graph break in user code at (.+):(\d+)|WON'T CONVERT \S+ (.+) line (\d+) ?)$", re.M)


def sites_torch_names(log: Path) -> tuple[int, set[tuple[str, int]]]:
    """(break records, distinct locations they name) in torch's log: each `dynamo_graph_break_reason`
    record names a frame's location on its first line."""
    records = [
        payload
        for name, md, payload in torch_trace_records(log)
        if name == "artifact" and md["artifact"]["name"] == "dynamo_graph_break_reason"
    ]
    named = set()
    for payload in records:
        m = _NAMED.match(payload)
        assert m, payload[:200]
        named.add((m.group(1) or m.group(3), int(m.group(2) or m.group(4))))
    return len(records), named


def _check_backend_failure_sites(doc: dict, records: int, named: set[tuple[str, int]]) -> None:
    assert records == 4 and len(named) == 2  # two failures, each logged twice, naming two frames
    assert doc["graph_break_count"] == records
    assert doc["unique_graph_break_count"] == len(named)
    sites = {s["user_stack"][-1]["function"]: s for s in doc["graph_breaks"]}
    for function, (first_line, line, code) in {
        "model": (24, 26, "return scale(y) + 1"),
        "scale": (20, 21, "return x * x.sum().item()"),
    }.items():
        site = sites[function]
        assert (site["file"], first_line) in named  # the frame torch names (`def model`, `def scale`)
        assert (site["type"], site["gb_id"]) == ("Backend compiler exception", "GB0219")
        assert site["occurrences"] == 2 and "aten._local_scalar_dense" in site["explanation"]
        # at the line torch was compiling in that frame, not at its caller's line
        last = site["user_stack"][-1]
        assert (site["line"], last["line"], last["code"]) == (line, line, code), site["user_stack"]


def test_backend_failure_sites_are_the_frames_torch_names_in_its_log(tmp_path: Path) -> None:
    log = tmp_path / "backend_failure.log"
    log.write_bytes(gzip.decompress(BACKEND_FAILURE_LOG.read_bytes()))
    doc = json.loads(run_tcx("explain", str(log), "--format", "json").stdout)
    records, named = sites_torch_names(log)
    # the log names the checkout it ran in: its paths end as the program's do
    assert all(file.endswith("fixtures/programs/backend_failure.py") for file, _ in named)
    _check_backend_failure_sites(doc, records, named)


def test_backend_failure_sites_live_equal_torchs_log_of_the_same_run() -> None:
    run = shared_run("explain", str(PROGRAMS / BACKEND_FAILURE), "--format", "json", trace=True).ok()
    records, named = sites_torch_names(run.torch_trace)
    _check_backend_failure_sites(run.json(), records, named)
