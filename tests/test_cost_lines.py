"""`tcx cost`: every row at a line — an extern call at the line of the graph node it computes (the
attention matmul at the attention line, not at the embedding lines its input chain starts from), a
backward graph's rows at the compile whose backward they are.

Read from a committed recording of a real run: `tcx cost fixtures/programs/cost/nano_train.py`
(Inductor, as the program asks: minutes of compile on 2 cores, so it is recorded once, see
fixtures/recordings/README.md) with torch's own TORCH_TRACE log of the same run beside it; the truth
here is that log, read by the tests' tiny parser (tests/conftest.py): each post-grad graph's nodes and
the `# File:` line torch printed above each.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from conftest import PROGRAMS, REPO, run_tcx, torch_trace_records

RECORDINGS = REPO / "fixtures" / "recordings"
RECORDING = RECORDINGS / "nano_train_inductor.tcx.gz"
LOG = RECORDINGS / "nano_train_inductor.torch_trace.log.gz"
PROGRAM = PROGRAMS / "cost" / "nano_train.py"
_FILE = re.compile(r"# File: (?P<file>.+?):(?P<line>\d+) in ")
_NODE = re.compile(r"^\s+(?P<name>\w+): \"[^\"]*\" = torch\.ops\.(?P<op>[\w.]+)\(")


def source_line(marker: str) -> int:
    found = [i for i, text in enumerate(PROGRAM.read_text().splitlines(), start=1) if marker in text]
    assert len(found) == 1, (marker, found)
    return found[0]


@pytest.fixture(scope="module")
def doc() -> dict:
    proc = run_tcx("cost", str(RECORDING), "--format", "json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def torch_nodes(
    tmp_path_factory: pytest.TempPathFactory,
) -> dict[tuple[str, int], dict[str, tuple[str, int]]]:
    """(compile id, its n-th post-grad graph: 0 forward or inference, 1 backward) -> node -> (op, line),
    from torch's log: the line is the `# File:` torch printed above the node."""
    log = tmp_path_factory.mktemp("log") / "torch_trace.log"
    log.write_bytes(gzip.decompress(LOG.read_bytes()))
    out: dict[tuple[str, int], dict[str, tuple[str, int]]] = {}
    seen: dict[str, int] = {}
    for name, md, payload in torch_trace_records(log):
        if name != "artifact" or md["artifact"]["name"] != "inductor_post_grad_graph":
            continue
        cid = f"{md['frame_id']}/{md['frame_compile_id']}"
        ordinal = seen[cid] = seen.get(cid, -1) + 1
        nodes: dict[str, tuple[str, int]] = {}
        line = 0
        for text in payload.splitlines():
            m = _FILE.search(text)
            if m:
                line = int(m.group("line")) if Path(m.group("file")).name == PROGRAM.name else 0
                continue
            m = _NODE.match(text)
            if m:
                nodes[m.group("name")] = (m.group("op"), line)
        out[(cid, ordinal)] = nodes
    return out


def groups(doc: dict) -> list[dict]:
    return doc["steps"]


def test_each_extern_row_is_at_the_line_of_the_node_it_computes(doc: dict, torch_nodes: dict) -> None:
    checked = 0
    for g in groups(doc):
        for row in g["breakdown"]:
            if row["part"] != "extern" or not row["site"] or row["site"].startswith("extern_kernels."):
                continue
            ordinal = 1 if row["phase"] == "backward" else 0
            op, line = torch_nodes[(row["compile_id"], ordinal)][row["site"]]
            assert op.split(".")[1] == row["name"].removeprefix("aten::"), (
                row
            )  # the node computes the call's op
            assert row["user_line"] and row["user_line"]["line"] == line, row
            checked += 1
    assert checked >= 10


def test_the_attention_matmul_is_at_the_attention_line(doc: dict) -> None:
    attention = source_line("# the attention matmul")
    embedding = source_line("self.tok_emb(idx) + self.pos_emb(pos)")
    for g in groups(doc):
        bmm = [
            r
            for r in g["breakdown"]
            if r["part"] == "extern" and r["name"] == "aten::bmm" and r["phase"] == "call"
        ]
        assert bmm, g["key"]
        lines = {r["user_line"]["line"] for r in bmm}
        assert attention in lines and embedding not in lines
    # in the codegen view's wrapper too: each extern call names the node it computes and that node's line
    proc = run_tcx("codegen", str(RECORDING), "--format", "json")
    externs = json.loads(proc.stdout)["extern_calls"]
    first = next(e for e in externs if e["name"] == "extern_kernels.bmm")
    assert first["user_line"]["line"] == attention and first["node"].startswith("bmm")
    text = run_tcx("codegen", str(RECORDING)).stdout
    assert f"computes {first['node']} at nano_train.py:{attention}" in text


def test_backward_rows_belong_to_the_compile_whose_backward_ran(doc: dict, torch_nodes: dict) -> None:
    train = next(g for g in groups(doc) if g["mode"] == "grad")
    backward = [
        r for r in train["breakdown"] if r["phase"] == "backward" and r["part"] in ("kernel", "extern")
    ]
    assert backward
    with_backward = {cid for cid, ordinal in torch_nodes if ordinal == 1}
    assert {r["compile_id"] for r in backward} == with_backward
    # a kernel or extern call with no line says which graph (and node) it is
    for row in train["breakdown"]:
        if row["part"] in ("kernel", "extern"):
            assert row["user_line"] or row["compile_id"], row
