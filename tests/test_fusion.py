"""`tcx fusion`: scheduler nodes, fused groups, kernels and WhyNoFuse reasons from a real Inductor run."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.torch


@pytest.fixture(scope="module")
def seed_f(recorded):
    return recorded("seed_f").view("fusion")


def test_seed_f_pointwise_fused_extern_kept(seed_f):
    assert seed_f["schema"] == "tcx.fusion/1"
    fw = next(g for g in seed_f["graphs"] if g["graph"] == "forward")
    ops = {o["op"] for n in fw["nodes"] for o in n["origins"]}
    assert "aten.relu.default" in ops
    fused = [g for g in fw["groups"] if g["kind"] == "fused"]
    assert fused and fused[0]["kernel"] in {k["name"] for k in seed_f["kernels"]}
    extern = [g for g in fw["groups"] if g["kind"] == "extern"]
    assert extern and extern[0]["kernel"].startswith("extern_kernels.")
    assert fw["fused_pairs"]
    bw = next(g for g in seed_f["graphs"] if g["graph"] == "backward")
    assert any(r["reason"] for r in bw["rejected"])  # Inductor's own WhyNoFuse text
    # Every pointwise node carries the user's line (torch 2.11 keeps no stack trace on the addmm that
    # a post-grad pattern creates, 2.13 does, so extern nodes are not required to).
    assert all(n.get("user_lines") for n in fw["nodes"] if n["kind"] != "extern")
