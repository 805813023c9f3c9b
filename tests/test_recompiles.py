"""`tcx recompiles`: the per-call timeline agrees with torch's own recompile log of the same run."""

from __future__ import annotations

import json

import pytest
from conftest import compile_id, read_torch_trace, run_tcx, torch_trace_records

pytestmark = pytest.mark.torch


def recompile_reasons(trace_dir) -> list[tuple[str, list[str]]]:
    """(compile id, [reason per entry]) for each recompile_reasons artifact, read independently."""
    out: list[tuple[str, list[str]]] = []
    for name, md, text in torch_trace_records(trace_dir):
        if name != "artifact" or md["artifact"]["name"] != "recompile_reasons":
            continue
        try:
            value = json.loads(text)  # several entries: a JSON list; one: the plain text
        except ValueError:
            value = text.rstrip("\n")
        items = value if isinstance(value, list) else [value]
        out.append((compile_id(md), [str(v).split("\nUser stack trace:", 1)[0] for v in items]))
    return out


def recompiles_with_trace(target: str, tmp_path, *extra: str):
    trace_dir = tmp_path / "torch_trace"
    proc = run_tcx("recompiles", target, "--format", "json", *extra, env={"TORCH_TRACE": str(trace_dir)})
    assert proc.stdout, proc.stderr
    return json.loads(proc.stdout), trace_dir, proc


def test_seed_f_four_calls_and_what_if(program, tmp_path):
    doc, trace_dir, proc = recompiles_with_trace(
        program("seed_f.py") + ":f",
        tmp_path,
        "--what-if",
        "100x32:grad",
        "--what-if",
        "16x32:grad",
        "--what-if",
        "100x32:f64:grad",
    )
    assert proc.returncode == 0, proc.stderr
    assert doc["schema"] == "tcx.recompiles/1"
    calls = doc["calls"]
    assert [c["outcome"] for c in calls] == ["compile", "hit", "recompile", "recompile"]
    assert [a["shape"][0] for a in (c["args"][0] for c in calls)] == [128, 128, 256, 32]
    assert calls[1]["entry"] == calls[0]["entry"]
    first, second = calls[2], calls[3]
    [size] = first["failed_guards"]
    assert (size["kind"], size["arg"], size["dim"], size["expected"], size["actual"]) == (
        "shape",
        "x",
        0,
        "128",
        "256",
    )
    assert size["entry"] == calls[0]["entry"]
    # Dimension 0 became symbolic in the entry the recompile created, guarded by the branch.
    prom = [p for p in doc["promotions"] if p["compile_id"] == first["entry"]]
    assert prom and prom[0]["arg"] == "x" and prom[0]["dim"] == 0
    assert prom[0]["replaced"] == "size[0] == 128"
    assert any("> 64" in g["expr"] for g in prom[0]["guards"])
    # The fourth call: the dynamic entry's `> 64` guard failed first (checked most recent first).
    assert second["checked"] == [first["entry"], calls[0]["entry"]]
    assert second["failed_guards"][0]["entry"] == first["entry"]
    assert second["failed_guards"][0]["kind"] == "dynamic_shape"
    assert "65 <= x.size()[0]" in second["failed_guards"][0]["guard"]
    assert second["failed_guards"][0]["actual"] == "32"
    # Torch's own log of the same run says the same.
    torch_reasons = recompile_reasons(trace_dir)
    assert doc["recompile_count"] == len(torch_reasons) == read_torch_trace(trace_dir).recompiles == 2
    for call, (cid, reasons) in zip([first, second], torch_reasons, strict=True):
        assert call["compile_id"] == cid
        assert [g["entry"] for g in call["failed_guards"]] == [r.split(":", 1)[0] for r in reasons]
        for g, r in zip(call["failed_guards"], reasons, strict=True):
            assert r.split(": ", 1)[1].startswith(g["guard"].split("  #")[0])
    # What-if: batch 100 -> the dynamic relu entry; 16 -> the tanh entry; float64 -> dtype guard.
    w100, w16, w64 = doc["what_if"]
    assert (w100["verdict"], w100["entry"]) == ("hit", first["entry"])
    assert (w16["verdict"], w16["entry"]) == ("hit", second["entry"])
    assert w64["verdict"] == "recompile"
    assert w64["failed_guards"] and all(g["kind"] == "dtype" for g in w64["failed_guards"])


CASES = {
    "dynamic_false_storm.py": ("shape specialization", 3),
    "changed_global.py": ("Python global value", 1),
    "dtype_change.py": ("dtype change", 1),
    "requires_grad_toggle.py": ("requires_grad change", 1),
    "recompile_limit.py": ("integer specialization", 3),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_recompile_count_matches_torch_trace(name, dynamo_recorded):
    run = dynamo_recorded(f"recompiles/{name}")
    doc, trace_dir = run.view("recompiles"), run.torch_trace
    cause, count = CASES[name]
    assert doc["recompile_count"] == read_torch_trace(trace_dir).recompiles == count
    torch_ids = [cid for cid, _ in recompile_reasons(trace_dir)]
    assert [
        c["compile_id"] for c in doc["calls"] if c["outcome"] in ("recompile", "eager") and c["compile_id"]
    ] == (torch_ids)
    recompiles = [c for c in doc["calls"] if c["outcome"] == "recompile"]
    assert recompiles and recompiles[0]["cause"] == cause
    assert all(c["remedy"] for c in recompiles)
    if name == "dynamic_false_storm.py":
        remedy = recompiles[0]["remedy"]
        assert "Dimension 0 of `x`" in remedy and "mark_dynamic(x, 0)" in remedy and "dynamic=False" in remedy
    if name == "changed_global.py":
        g = recompiles[0]["failed_guards"][0]
        assert (g["arg"], g["expected"], g["actual"]) == ("SCALE", "2", "3")
    if name == "recompile_limit.py":
        eager = [c for c in doc["calls"] if c["outcome"] == "eager"]
        assert len(eager) == 3
        assert eager[0]["cause"] == "recompile limit"
        assert doc["recompile_limit"]["limit"] == 3 and doc["recompile_limit"]["hit"] is True
        assert "set_stance" in eager[0]["remedy"] and "recompile_limit" in eager[0]["remedy"]
        text = run_tcx("show", str(trace_dir), "--format", "json")
        assert json.loads(text.stdout)["recompile_count"] == doc["recompile_count"]
        offline = run_tcx("recompiles", str(trace_dir), "--format", "json")
        assert offline.returncode == 0, offline.stderr
        off = json.loads(offline.stdout)
        assert off["recompile_count"] == doc["recompile_count"] and off["note"]
        assert [c["outcome"] for c in off["calls"]].count("eager") == 1


def test_text_report_shouts_the_limit(dynamo_recorded):
    recording = dynamo_recorded("recompiles/recompile_limit.py").recording
    proc = run_tcx("recompiles", str(recording), "--width", "120")
    assert proc.returncode == 0, proc.stderr
    assert "RECOMPILE LIMIT HIT" in proc.stdout and "torch._dynamo.config.recompile_limit = 3" in proc.stdout
    assert "EAGER" in proc.stdout


def test_every_call_is_counted_past_the_listed_ones(dynamo_recorded):
    """3000 calls of step, then 20 of other: the first 1000 calls and every recompile are listed,
    the other hits counted exactly, each for the cache entry that served it (so per function)."""
    run = dynamo_recorded("recompiles/hot_loop.py")
    doc = run.view("recompiles")
    assert doc["call_count"] == 3020 and doc["call_count_exact"] is True
    assert doc["outcomes"] == {"compile": 2, "hit": 3016, "recompile": 2, "eager": 0}
    assert [c["index"] for c in doc["calls"] if c["outcome"] == "recompile"] == [1000, 2000]
    assert doc["calls_not_listed"] == 3016 - 999  # hits #1-#999 are listed
    served = {
        e["compile_id"]: (e["served"], e["hits_not_listed"]) for es in doc["entries"].values() for e in es
    }
    assert {cid: unlisted for cid, (_, unlisted) in served.items()} == {
        "0/0": 0,
        "0/1": 999,
        "0/2": 999,
        "1/0": 19,
    }
    assert len(served["0/0"][0]) == 1000 and served["0/1"][0] == [1000] and served["1/0"][0] == [3000]
    per_function = {}
    for name in ("step", "other"):
        proc = run_tcx("recompiles", f"{run.recording}:{name}", "--format", "json")
        assert proc.returncode == 0, proc.stderr
        per_function[name] = json.loads(proc.stdout)
    step, other = per_function["step"], per_function["other"]
    assert step["call_count"] == 3000 and step["calls_not_listed"] == 3000 - 1002
    assert step["outcomes"] == {"compile": 1, "hit": 2997, "recompile": 2, "eager": 0}
    assert other["call_count"] == 20 and other["calls_not_listed"] == 19
    assert other["outcomes"] == {"compile": 1, "hit": 19, "recompile": 0, "eager": 0}
    other_text = run_tcx("recompiles", f"{run.recording}:other").stdout
    assert "19 cache hits of these frames, counted, not listed" in other_text and "hit ×" not in other_text
    text = run_tcx("recompiles", str(run.recording)).stdout
    assert "#1–#999" in text and "hit ×999" in text and "#1001–#1999" in text
    assert "created by call #1000 · 999 hits counted, not listed" in text and "never hit again" not in text
