"""`tcx cache`: cache hits, misses and bypasses per compile, why a warm run missed, and compile time.

Every expectation is read from torch's own records of the same runs, with a tiny parser kept
apart from tcx's: the `fx_graph_cache_*` / `aotautograd_cache_*` artifacts (state, key parts,
bypass reason) and `compilation_metrics`. The four cases of the issue, each from two saved
TORCH_TRACE logs (fixtures/torch-trace/tcx-cache/, see its README) and live:
(a) a warm run hits everything; (b) an Inductor flag flipped in the warm run's environment is a
miss naming that key; (c) a changed constant is a miss showing the graph's diff at the user's
line; (d) a custom pass Inductor cannot hash is a bypass with torch's reason.
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest
from conftest import PROGRAMS, REPO, TRACE_FIXTURES, run_tcx

LOGS = TRACE_FIXTURES / "tcx-cache"
TINY = str(PROGRAMS / "cache" / "tiny.py")
CUSTOM_PASS = str(PROGRAMS / "cache" / "custom_pass.py")
DISABLED = REPO / "tests" / "data" / "golden" / "two_functions_inductor.tcx.gz"
_RECORD = re.compile(r"^[VIWEF]\d{4} [\d:.]+ +\d+ [^\]]*\] (\{.*\})\s*$")
_PART = re.compile(r"^\[(\w+)\] ([^:]+):", re.DOTALL)
_CACHE_ARTIFACT = re.compile(r"^(fx_graph|aotautograd)_cache_(hit|miss|bypass)$")
SCALE_LINE = next(
    i for i, line in enumerate(Path(TINY).read_text().splitlines(), 1) if "torch.relu(x) * SCALE" in line
)


# ----------------------------------------------------------------- torch's own records


def torch_records(path: Path) -> list[tuple[dict, str]]:
    """(metadata, payload) of every record in a TORCH_TRACE log (.gz) or a tcx recording."""
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as fh:
        text = fh.read()
    if path.name.endswith((".tcx", ".tcx.gz")):
        events = [json.loads(line) for line in text.splitlines() if line.strip()]
        return [(e["md"], e.get("payload") or "") for e in events if e.get("kind") == "trace"]
    records: list[tuple[dict, list[str]]] = []
    for line in text.splitlines():
        if line.startswith("\t") and records:
            records[-1][1].append(line[1:])
        elif m := _RECORD.match(line):
            records.append((json.loads(m.group(1)), []))
    return [(md, "\n".join(lines)) for md, lines in records]


def torch_lookups(path: Path) -> list[tuple[str, str, dict]]:
    """(cache, state, payload) of every cache artifact torch logged, in order."""
    out = []
    for md, payload in torch_records(path):
        m = _CACHE_ARTIFACT.match((md.get("artifact") or {}).get("name", ""))
        if m:
            out.append((m.group(1), m.group(2), json.loads(payload)))
    return out


def torch_metrics(path: Path) -> list[dict]:
    return [md["compilation_metrics"] for md, _ in torch_records(path) if "compilation_metrics" in md]


def parts(payload: dict) -> dict[str, str]:
    """Key part name -> its digest, from torch's `components` lines."""
    return {m.group(2): m.group(1) for m in map(_PART.match, payload.get("components") or []) if m}


def differing_parts(old: dict, new: dict) -> set[str]:
    a, b = parts(old), parts(new)
    return {name for name in a.keys() | b.keys() if a.get(name) != b.get(name)}


def only(lookups: list[tuple[str, str, dict]], cache: str) -> dict:
    found = [payload for c, _, payload in lookups if c == cache]
    assert len(found) == 1, f"{cache}: {len(found)} lookups"
    return found[0]


# ----------------------------------------------------------------- tcx's view


def cache_json(*args: str) -> dict:
    proc = run_tcx("cache", *args, "--format", "json", timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def tcx_lookups(doc: dict, run: str) -> list[dict]:
    return [lk for c in doc["compiles"] for r in c["runs"] if r["run"] == run for lk in r["lookups"]]


def tcx_lookup(doc: dict, run: str, cache: str) -> dict:
    found = [lk for lk in tcx_lookups(doc, run) if lk["cache"] == cache]
    assert len(found) == 1, found
    return found[0]


def states(lookups: list) -> list[tuple[str, str]]:
    return sorted((lk["cache"], lk["state"]) if isinstance(lk, dict) else lk[:2] for lk in lookups)


def assert_same_as_torch(doc: dict, run: str, source: Path) -> None:
    """tcx's lookups and compile time of one run are torch's, read from that run's own records."""
    assert states(tcx_lookups(doc, run)) == states(torch_lookups(source))
    metrics = torch_metrics(source)
    side = next(r for r in doc["runs"] if r["label"] == run)
    assert side["compile_seconds"] == pytest.approx(
        sum(m["entire_frame_compile_time_s"] for m in metrics), abs=2e-3
    )
    fx_hits = sum(1 for c, s, _ in torch_lookups(source) if c == "fx_graph" and s == "hit")
    assert fx_hits == sum(m.get("inductor_fx_local_cache_hit_count") or 0 for m in metrics)
    for compile_ in doc["compiles"]:
        this = next(r for r in compile_["runs"] if r["run"] == run)
        if this["phases"] and this["seconds"]:  # torch's timers add up to torch's total
            assert sum(this["phases"].values()) == pytest.approx(this["seconds"], rel=0.02)


def config_change(lookup: dict, key: str) -> dict:
    changes = [c for c in lookup["why"]["changes"] if c["kind"] == "config" and c["name"].endswith(f" {key}")]
    assert changes, lookup["why"]
    return changes[0]


def graph_lines(lookup: dict) -> list[dict]:
    graph = [c for c in lookup["why"]["changes"] if c["kind"] == "graph"]
    assert len(graph) == 1, lookup["why"]
    return graph[0]["diff"]


def assert_scale_diff(lines: list[dict]) -> None:
    """The graph's multiplication by SCALE changed from 2.0 to 3.0, at tiny.py's line."""
    removed = [x for x in lines if x["line"].startswith("-")]
    added = [x for x in lines if x["line"].startswith("+")]
    assert len(removed) == len(added) == 1, lines
    assert "2.0" in removed[0]["line"] and "3.0" in added[0]["line"]
    for x in lines:
        assert x["user"]["file"].endswith("tiny.py") and x["user"]["line"] == SCALE_LINE, x


# ----------------------------------------------------------------- offline: two saved logs


def test_a_warm_log_hits_every_lookup_torch_logged():
    doc = cache_json(str(LOGS / "cold.log.gz"), str(LOGS / "warm.log.gz"))
    assert_same_as_torch(doc, "A", LOGS / "cold.log.gz")
    assert_same_as_torch(doc, "B", LOGS / "warm.log.gz")
    warm = torch_lookups(LOGS / "warm.log.gz")
    assert {s for _, s, _ in warm} == {"hit"} and len(warm) == 2
    assert doc["cache_miss_count"] == 0 and doc["cache_hit_count"] == 2
    assert tcx_lookup(doc, "B", "fx_graph")["time_saved_s"] == pytest.approx(
        only(warm, "fx_graph")["time_saved_ns"] / 1e9, abs=1e-3
    )
    cold_s, warm_s = (
        sum(m["entire_frame_compile_time_s"] for m in torch_metrics(LOGS / f))
        for f in ("cold.log.gz", "warm.log.gz")
    )
    assert doc["saved_seconds"] == pytest.approx(cold_s - warm_s, abs=2e-3) and doc["saved_seconds"] > 0
    assert doc["fully_warm"][0]["basis"].startswith("measured") and doc["time_sinks"][0]["function"] == "f"


def test_a_flipped_inductor_flag_is_named_from_torchs_key_parts():
    doc = cache_json(str(LOGS / "cold.log.gz"), str(LOGS / "size_asserts_off.log.gz"))
    assert_same_as_torch(doc, "B", LOGS / "size_asserts_off.log.gz")
    old, new = (only(torch_lookups(LOGS / f), "fx_graph") for f in ("cold.log.gz", "size_asserts_off.log.gz"))
    assert differing_parts(old, new) == {"inductor_config[size_asserts]"}  # torch's own digests
    fx = tcx_lookup(doc, "B", "fx_graph")
    assert fx["state"] == "miss" and [c["name"] for c in fx["why"]["changes"]] == [
        "Inductor config size_asserts"
    ]
    assert (config_change(fx, "size_asserts")["old"], config_change(fx, "size_asserts")["new"]) == (
        "True",
        "False",
    )
    # This log has no AOTAutograd key parts (torch logs them at DEBUG only): compilation_metrics
    # still name the flag.
    aot = tcx_lookup(doc, "B", "aotautograd")
    assert aot["state"] == "miss" and not aot["key_parts_logged"]
    assert [c["name"] for c in aot["why"]["changes"]] == ["Inductor config size_asserts"]
    text = run_tcx(
        "cache", str(LOGS / "cold.log.gz"), str(LOGS / "size_asserts_off.log.gz"), "--width", "200"
    )
    assert "Inductor config size_asserts  True → False" in text.stdout


def test_a_changed_constant_shows_the_graph_diff_at_the_user_line():
    doc = cache_json(str(LOGS / "cold.log.gz"), str(LOGS / "scale_3.log.gz"))
    old, new = (only(torch_lookups(LOGS / f), "fx_graph") for f in ("cold.log.gz", "scale_3.log.gz"))
    assert differing_parts(old, new) == {"gm"}
    fx = tcx_lookup(doc, "B", "fx_graph")
    assert fx["state"] == "miss"
    assert_scale_diff(graph_lines(fx))
    assert tcx_lookup(doc, "B", "aotautograd")["state"] == "miss"


def test_an_unhashable_custom_pass_is_a_bypass_with_torchs_reason():
    cold, warm = LOGS / "custom_pass_cold.log.gz", LOGS / "custom_pass_warm.log.gz"
    doc = cache_json(str(cold), str(warm))
    for label, log in (("A", cold), ("B", warm)):
        assert_same_as_torch(doc, label, log)
        reasons = {(c, p["cache_bypass_reason"]) for c, s, p in torch_lookups(log) if s == "bypass"}
        assert len(reasons) == 2
        assert {(lk["cache"], lk["bypass_reason"]) for lk in tcx_lookups(doc, label)} == reasons
        assert all(
            lk["why"]["summary"] == f"bypassed: {lk['bypass_reason']}" for lk in tcx_lookups(doc, label)
        )
    assert doc["cache_miss_count"] == doc["cache_bypass_count"] == 2


def test_check_gates_on_cache_misses_and_compile_time_of_the_run_it_reads():
    passed = run_tcx(
        "check", str(LOGS / "warm.log.gz"), "--max-cache-misses", "0", "--max-compile-seconds", "1000"
    )
    assert passed.returncode == 0, passed.stdout + passed.stderr
    log = LOGS / "size_asserts_off.log.gz"
    failed = run_tcx(
        "check", str(log), "--max-cache-misses", "1", "--max-compile-seconds", "0.5", "--format", "json"
    )
    assert failed.returncode == 1, failed.stderr
    budgets = {b["option"]: b for b in json.loads(failed.stdout)["budgets"]}
    misses = sum(1 for _, s, _ in torch_lookups(log) if s != "hit")
    assert (
        budgets["--max-cache-misses"]["actual"] == misses == 2 and budgets["--max-cache-misses"]["exceeded"]
    )
    seconds = sum(m["entire_frame_compile_time_s"] for m in torch_metrics(log))
    assert budgets["--max-compile-seconds"]["actual"] == pytest.approx(seconds, abs=2e-3)
    # A recording made with the caches off cannot tell misses: an error, never "0 misses".
    blind = run_tcx("check", str(DISABLED), "--max-cache-misses", "0")
    assert blind.returncode == 4 and "caches were disabled" in blind.stderr


# ----------------------------------------------------------------- live: cold, then warm


@pytest.mark.torch
@pytest.mark.inductor
def test_live_a_flag_in_the_warm_env_misses_then_the_next_warm_run_hits(tmp_path):
    save = tmp_path / "run.tcx"
    doc = cache_json(TINY, "--runs", "2", "--env", "TORCHINDUCTOR_SIZE_ASSERTS=0", "--save", str(save))
    saved = {"cold": tmp_path / "run.cold.tcx", "warm 1": tmp_path / "run.warm1.tcx", "warm 2": save}
    assert [r["label"] for r in doc["runs"]] == list(saved)
    for label, path in saved.items():
        assert_same_as_torch(doc, label, path)
    # warm 1: both caches missed; torch's digests differ in size_asserts alone, and tcx names it
    for cache in ("fx_graph", "aotautograd"):
        old, new = (only(torch_lookups(saved[r]), cache) for r in ("cold", "warm 1"))
        assert differing_parts(old, new) == {"inductor_config[size_asserts]"}, cache
        lookup = tcx_lookup(doc, "warm 1", cache)
        assert lookup["state"] == "miss" and lookup["key_parts_logged"]
        assert (
            config_change(lookup, "size_asserts")["old"],
            config_change(lookup, "size_asserts")["new"],
        ) == (
            "True",
            "False",
        )
    # warm 2 (same environment): everything hits what warm 1 stored
    assert {s for _, s, _ in torch_lookups(save)} == {"hit"}
    assert all(lk["why"]["summary"] == "stored by warm 1" for lk in tcx_lookups(doc, "warm 2"))
    assert doc["judged_run"] == "warm 2" and doc["cache_miss_count"] == 0
    assert doc["fully_warm"][0]["basis"] == "measured: every lookup hit in warm 2"


@pytest.mark.torch
@pytest.mark.inductor
def test_live_a_changed_constant_shows_the_graph_diff():
    doc = cache_json(TINY, "--env", "TCX_CACHE_SCALE=3")
    for cache in ("fx_graph", "aotautograd"):  # AOTAutograd's key holds the Dynamo graph
        lookup = tcx_lookup(doc, "warm", cache)
        assert lookup["state"] == "miss"
        assert_scale_diff(graph_lines(lookup))
    assert doc["runs"][1]["env"] == {"TCX_CACHE_SCALE": "3"} and doc["runs"][0]["env"] == {}


@pytest.mark.torch
@pytest.mark.inductor
def test_live_an_unhashable_custom_pass_is_a_bypass(tmp_path):
    save = tmp_path / "run.tcx"
    doc = cache_json(CUSTOM_PASS, "--save", str(save))
    for label, path in (("cold", tmp_path / "run.cold.tcx"), ("warm", save)):
        assert_same_as_torch(doc, label, path)
        torch_reasons = {(c, p["cache_bypass_reason"]) for c, s, p in torch_lookups(path) if s == "bypass"}
        assert {(lk["cache"], lk["bypass_reason"]) for lk in tcx_lookups(doc, label)} == torch_reasons
        assert {r for _, r in torch_reasons} == {"Unsupported post grad custom pass"}


@pytest.mark.torch
@pytest.mark.inductor
def test_live_check_judges_the_warm_run():
    proc = run_tcx(
        "check",
        TINY,
        "--max-cache-misses",
        "0",
        "--max-compile-seconds",
        "0.001",
        "--format",
        "json",
        timeout=900,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]
    budgets = {b["option"]: b for b in json.loads(proc.stdout)["budgets"]}
    assert budgets["--max-cache-misses"]["actual"] == 0 and not budgets["--max-cache-misses"]["exceeded"]
    assert budgets["--max-compile-seconds"]["exceeded"] and budgets["--max-compile-seconds"]["actual"] > 0
