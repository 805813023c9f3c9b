"""`tcx trace`: Dynamo's symbolic execution, checked against the graphs torch logged in the same run."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
from conftest import compile_id, run_tcx, torch_trace_records

pytestmark = pytest.mark.torch

_ASSIGN = re.compile(r"^ {8}(\w+)(?:: \"[^\"]*\")? = (.*)$")


def trace_json(target: str, tmp_path: Path, *extra: str) -> tuple[dict, dict]:
    """`tcx trace --format json` with TORCH_TRACE: tcx's view, torch's graphs by (compile id, attempt)."""
    trace_dir = tmp_path / "torch_trace"
    proc = run_tcx("trace", target, "--format", "json", *extra, env={"TORCH_TRACE": str(trace_dir)})
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), torch_graph_nodes(trace_dir)


def recorded_trace(run, *extra: str) -> tuple[dict, dict]:
    """`tcx trace` of the session's recording of a fixture program, and torch's graphs of that run."""
    return run.view("trace", *extra), torch_graph_nodes(run.torch_trace)


def torch_graph_nodes(directory: Path) -> dict[tuple[str, int], Counter]:
    """Node names of every `dynamo_output_graph` payload (the graph torch printed), output node left out."""
    return {
        (compile_id(md), md.get("attempt") or 0): _nodes_of(payload.splitlines())
        for name, md, payload in torch_trace_records(directory)
        if name == "dynamo_output_graph"
    }


def _nodes_of(lines: list[str]) -> Counter:
    start = next(i for i, ln in enumerate(lines) if ln.startswith("    def forward(self"))
    args = re.findall(r"(\w+)(?:: \"[^\"]*\")?(?=[,)])", lines[start].split("(self", 1)[1])
    names: list[str] = []
    aliased: set[str] = set()
    for ln in lines[start + 1 :]:
        if ln.startswith("    ") and not ln.startswith("        ") and ln.strip():
            break  # the next method or nested class of the GraphModule
        m = _ASSIGN.match(ln)
        if m:
            names.append(m.group(1))
            rhs = m.group(2).split(";")[0].strip()
            if rhs in args:
                aliased.add(rhs)
    names += [a for a in args if a not in aliased]
    return Counter(names)


def _compile(doc: dict, compile_id: str, attempt: int | None = None) -> dict:
    found = [c for c in doc["compiles"] if c["compile_id"] == compile_id]
    assert found, [c["compile_id"] for c in doc["compiles"]]
    return found[-1] if attempt is None else next(c for c in found if c["attempt"] == attempt)


def _at(comp: dict, opname: str) -> dict:
    return next(i for i in comp["instructions"] if i["opname"] == opname)


def test_seed_f_branch_is_decided_at_trace_time(program, tmp_path):
    doc, graphs = trace_json(
        f"{program('seed_f.py')}:f", tmp_path, "--call", "128x32,32x64,64", "--call", "256x32,32x64,64"
    )
    assert doc["schema"] == "tcx.trace/1" and doc["available"]
    static = _compile(doc, "0/0")
    assert _at(static, "COMPARE_OP")["folded"] == "True"
    jump = next(i for i in static["instructions"] if "JUMP" in i["opname"] and "IF" in i["opname"])
    assert jump["decided"]["condition"] == "True" and jump["decided"]["jumped"] is False
    assert any("size=[128, 32]" in g for g in jump["decided"]["guards"])
    assert static["graph_break"] is None and static["compiled_at"]["opname"] == "RETURN_VALUE"
    # Only the relu branch reached the graph, exactly as torch printed it.
    assert Counter(n for n in static["graph_nodes"] if n != "output") == graphs[("0/0", 0)]
    assert "relu" in static["graph_nodes"] and not any("tanh" in n for n in static["graph_nodes"])
    dynamic = _compile(doc, "0/1")
    assert any("s" in item and "[s" in item for i in dynamic["instructions"] for item in i["stack"])
    jump = next(i for i in dynamic["instructions"] if "JUMP" in i["opname"] and "IF" in i["opname"])
    assert jump["decided"]["condition"].startswith("Sym(") and "> 64" in jump["decided"]["condition"]
    assert any("> 64" in g for g in jump["decided"]["guards"])


def test_data_dependent_if_breaks_at_the_jump(dynamo_recorded):
    doc, _ = recorded_trace(dynamo_recorded("data_dependent_if.py"))
    first = _compile(doc, "0/0")
    brk = first["graph_break"]
    assert brk is not None and "JUMP" in brk["opname"] and brk["line"] == 9
    assert first["compiled_at"]["offset"] == brk["offset"]
    resumed = [c for c in doc["compiles"] if c["function"] == "torch_dynamo_resume_in_g_at_9"]
    assert resumed and all(c["instructions"] for c in resumed)


@pytest.mark.parametrize(
    "name", ["seed_f.py", "data_dependent_if.py", "nested_break.py", "models/tiny_llama.py"]
)
def test_every_graph_node_comes_from_exactly_one_instruction(name, dynamo_recorded):
    doc, graphs = recorded_trace(dynamo_recorded(name))
    assert graphs, "torch logged no graph"
    for (cid, attempt), expected in graphs.items():
        comp = _compile(doc, cid, attempt)
        per_instruction = Counter(n for ins in comp["instructions"] for n in ins["nodes"] if n != "output")
        in_graph = Counter(n for n in comp["graph_nodes"] if n != "output")
        assert in_graph == expected, (cid, attempt)
        assert all(per_instruction[n] == 1 for n in expected), (cid, attempt)


def test_inlined_calls_nest_under_their_call(dynamo_recorded):
    doc, _ = recorded_trace(dynamo_recorded("models/tiny_llama.py"), "--limit", "5000")
    nested = [i for c in doc["compiles"] for i in c["instructions"] if i["depth"] > 0]
    assert nested
    comp = next(c for c in doc["compiles"] if any(i["depth"] for i in c["instructions"]))
    ins = comp["instructions"]
    first = next(k for k, i in enumerate(ins) if i["depth"] > 0)
    # The instruction that entered the inlined code sits one level up: a CALL, or on Python 3.12
    # also a LOAD_ATTR whose property getter Dynamo inlines.
    entering = ins[first - 1]
    assert entering["depth"] == ins[first]["depth"] - 1
    assert entering["opname"].startswith(("CALL", "LOAD_ATTR", "BINARY_SUBSCR", "FOR_ITER", "BINARY_OP"))


def test_text_report_and_filters(program):
    proc = run_tcx(
        "trace", f"{program('seed_f.py')}:f", "--call", "128x32,32x64,64", "--compile", "0/0", "--limit", "5"
    )
    assert proc.returncode == 0, proc.stderr
    assert "compile 0/0" in proc.stdout and "more instructions not shown" in proc.stdout


def test_trace_log_says_it_needs_a_live_run(dynamo_recorded):
    proc = run_tcx("trace", str(dynamo_recorded("data_dependent_if.py").torch_trace), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["available"] is False and "live run" in doc["unavailable_reason"]


def test_restarted_trace_is_attempt_1_of_the_same_compile(dynamo_recorded):
    """A print makes Dynamo restart the analysis: attempt 0 ends at the break, attempt 1 compiles."""
    doc, graphs = recorded_trace(dynamo_recorded("print_break.py"))
    attempts = [c for c in doc["compiles"] if c["compile_id"] == "0/0"]
    assert [c["attempt"] for c in attempts] == [0, 1]
    first, second = attempts
    assert first["restarted"] is True and first["graph_break"]["type"] == "Failed to trace builtin operator"
    assert first["graph_break"]["line"] == 9
    assert second["restarted"] is False and second["compiled_at"]
    # torch printed the graph of attempt 1 only: that is the graph the second attempt attributes
    assert ("0/0", 1) in graphs and ("0/0", 0) not in graphs
    in_graph = Counter(n for n in second["graph_nodes"] if n != "output")
    assert in_graph == graphs[("0/0", 1)]
