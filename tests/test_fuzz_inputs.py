"""Property-based fuzzing of the input boundary: mutated TORCH_TRACE logs and recordings.

Each example takes a small real log or recording from the repository, mutates a few records
and writes it to a file. A mutation is either one the schema refuses (a field of the wrong type,
a missing key, a corrupt or reordered line: the loaders report and skip it), or one it admits
(tests/schema_values.py: a field the schema names set to null, a 400-digit or negative integer,
NaN, an empty or hostile string ...: it reaches every view), or a broken payload. The file is
read the way the CLI does: load it, build the model and every view's JSON (the report builds
each registered view) and print the report's JSON; one example in RENDER_ONE_IN instead prints
every registered view in every format (tests/view_outputs.py), where no control byte may come
out raw. Nothing may raise except tcx's own errors, which the CLI turns into a message and a
documented exit code; anything else is exit 5 (an internal error).

Deterministic (derandomized) so CI is reproducible. 5,600 examples in four tests that xdist
runs side by side; tests/test_bad_input_round2.py walks every view and format systematically.

Round three (issue 36, tests/test_bad_input_round3.py) adds three inputs from anywhere: hostile
MCP tool arguments (200: links out of the root behind `:a.b` suffixes, NUL bytes, names too long,
whole numbers as floats; no file outside the root may be opened), mutated baselines (300: 400-digit
counts and times, NaN, deep nesting; read by `check --baseline` and `diff` in every format) and
hostile program sources for `tcx fix`'s rewriters (150: coding cookies, BOMs, \r line ends,
characters str.splitlines splits at, 200 kB lines, NUL and undecodable bytes; a rewrite compiles
and keeps every line number). About 20 s together.
"""

from __future__ import annotations

import functools
import gzip
import itertools
import json
import os
import random
import re
import shutil
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, TRACE_FIXTURES
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schema_values import with_one_extreme
from view_outputs import every_output

from tcx.core.errors import TcxError
from tcx.core.ingest.recording import load_recording
from tcx.core.ingest.trace_log import load_trace
from tcx.core.model import RunModel, build_model
from tcx.core.views import fusion as fusion_view
from tcx.core.views import report
from tcx.renderers.safe import json_text

# The fuzzer runs in `make test`, not in `make test-fast` (the inner loop).
pytestmark = pytest.mark.fuzz

# Examples per test below; xdist runs the four side by side. 2500 + 1500 mutated logs and
# 2 x 800 mutated recordings: 5,600 in all.
LOG_EXAMPLES = {"tlparse-logs": 2500, "torch2.13-logs": 1500}
RECORDING_EXAMPLES = 800
# One example in RENDER_ONE_IN prints every view in every format (slow): counted, not drawn,
# since hypothesis draws the ends of an integer range far more often than the rest (a draw of
# `integers(1, 100) == 1` came up in a quarter of the examples).
RENDER_ONE_IN = 40
# A control byte printed raw: text from the input is escaped on every path to any output.
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")

INPUTS = TRACE_FIXTURES / "tlparse-tests" / "inputs"
DATA = REPO / "tests" / "data"
RANKS = "two ranks"  # two ranks' logs read as one directory (per-rank models, divergence)
RANK_LOGS = [INPUTS / "multi_rank_logs" / f"dedicated_log_torch_trace_rank_{r}.log" for r in (0, 2)]
LOG_GROUPS = {
    "tlparse-logs": [
        INPUTS / "comp_failure.log",
        INPUTS / "comp_metrics.log",
        INPUTS / "artifacts.log",
        INPUTS / "export.log",
    ],
    "torch2.13-logs": [
        DATA / "traces" / "torch2.13_eager_loop_break.log.gz",
        DATA / "traces" / "torch2.13_eager_library_break.log.gz",
        RANKS,
    ],
}
RECORDING = DATA / "recordings" / "tiny.tcx.gz"
LOOP_LOG = DATA / "traces" / "torch2.13_eager_loop_break.log.gz"
# Real `what_if` and `cuda_preview` events of the same program, from `tcx recompiles --what-if`
# and `tcx codegen --target cuda:sm_90` runs (see tests/data/README.md).
EXTRA_EVENTS = DATA / "recordings" / "tiny_extra_events.jsonl"

_PREFIX = re.compile(r"^[VIWEF]\d{4} \d{2}:\d{2}:\d{2}\.\d+ +\d+ [^\]]*\] ")

FUZZ_SETTINGS = {
    "deadline": None,
    "derandomize": True,
    "database": None,
    "suppress_health_check": [
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.large_base_example,
    ],
}

# ------------------------------------------------------------------ base inputs


def _text(path: Path) -> str:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return fh.read()


@functools.cache
def log_records(path: Path) -> tuple[tuple[str, str, tuple[str, ...]], ...]:
    """(glog prefix, metadata JSON, payload lines) of each record of a real log."""
    records: list[tuple[str, str, list[str]]] = []
    for line in _text(path).splitlines(keepends=True):
        m = _PREFIX.match(line)
        if m:
            records.append((line[: m.end()], line[m.end() :].rstrip("\n"), []))
        elif line.startswith("\t") and records:
            records[-1][2].append(line)
    return tuple((p, md, tuple(payload)) for p, md, payload in records)


@functools.cache
def recording_lines(with_extra: bool) -> tuple[str, ...]:
    """The recording's lines. For speed, Chromium timing events (no view reads them) are left out
    and long metadata strings (the config dumps in compilation_metrics) are cut short."""
    lines = []
    for line in _text(RECORDING).splitlines():
        event = json.loads(line)
        if "chromium_event" not in event.get("md", {}):
            lines.append(json.dumps(_short_strings(event) if "md" in event else event))
    if with_extra:
        lines[-2:-2] = EXTRA_EVENTS.read_text(encoding="utf-8").splitlines()
    return tuple(lines)


def _short_strings(event: dict[str, Any]) -> dict[str, Any]:
    def cut(value: Any) -> Any:
        if isinstance(value, str):
            return value[:200]
        if isinstance(value, dict):
            return {k: cut(v) for k, v in value.items()}
        return [cut(v) for v in value] if isinstance(value, list) else value

    return {**event, "md": cut(event["md"])}


# ------------------------------------------------------------------ hostile values

HOSTILE_STRINGS = [
    "",
    "?",
    "0/0",
    "1/0",
    "!0/0/0",
    "rank1:0/0",
    "<script>alert(1)</script>",
    "[bold red]x[/]",
    "\x1b[31mred\x1b[0m\x9b2J",
    "x \ud800 y",
    "torch_dynamo_resume_in_f_at_3",
    "torch_dynamo_resume_in__at_x",
    "__compiled_fn_1",
    "__resume_at_30_2",
    "/etc/passwd",
    "L['x']",
    "tensor 'L['x']' size mismatch at index 0. expected 4, actual 8",
    "a" * 3000,
    "line1\nline2\r\n",
    "NaN",
    "-1",
    "JUMP_FORWARD to 40",
]
HOSTILE_SCALARS = [None, True, False, 0, -1, 1, 7, 2**63, -(2**70), float("nan"), float("inf"), -0.0, 1.5]
HOSTILE_COMPOUNDS = [[], {}, [None], [1, "a"], [[1, 2]], [{}], {"name": 3}, {"line": "x"}, {"": []}]
# Whole lines that are not what a record should be.
BAD_LINES = [
    "",
    "{",
    "[]",
    "null",
    '"kind"',
    "42",
    "{}",
    '{"kind": null}',
    '{"kind": ["trace"]}',
    '{"kind": "trace", "md": []}',
    '{"kind": "trace", "md": {"str": ["a", 1]}, "payload": 3}',
    "[" * 3000 + "]" * 3000,
    '{"x": ' + "9" * 5000 + "}",
    '{"kind": "source", "file": "\\ud800", "text": "\\udfff"}',
    "\x00\x01\x02 binary",
]
# Characters that mean something to a parser, a terminal or a browser.
ALPHABET = "ax09 _-./:'\"\\<>[]{}()|`*#\n\t\r\x00\x1b\x9b\u00e9\u4e2d\ud800"


def hostile(rnd: random.Random, depth: int = 0) -> Any:
    """A value of a type a field does not expect, or a string that attacks what shows it."""
    roll = rnd.random()
    if roll < 0.3:
        return rnd.choice(HOSTILE_SCALARS)
    if roll < 0.55:
        return rnd.choice(HOSTILE_STRINGS)
    if roll < 0.7:
        return "".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(0, 12)))
    if roll < 0.85 or depth > 2:
        return rnd.choice(HOSTILE_COMPOUNDS)
    if rnd.random() < 0.5:
        return [hostile(rnd, depth + 1) for _ in range(rnd.randint(1, 3))]
    return {rnd.choice(["name", "line", "file", "kind", "x"]): hostile(rnd, depth + 1)}


def mutated(value: Any, rnd: random.Random) -> Any:
    """`value` with one place inside it (found by a short random walk) changed or removed."""
    if not isinstance(value, (dict, list)) or not value or rnd.random() < 0.2:
        how = rnd.randrange(8)
        if how == 0:
            return [value]
        if how == 1:
            return {"value": value}
        if how == 2:
            return str(value)
        return hostile(rnd)
    copy: Any = dict(value) if isinstance(value, dict) else list(value)
    key = rnd.choice(list(copy)) if isinstance(copy, dict) else rnd.randrange(len(copy))
    if rnd.random() < 0.15:
        del copy[key]
    else:
        copy[key] = mutated(copy[key], rnd)
    return copy


def mutated_json_line(line: str, rnd: random.Random) -> str:
    """One JSON line with one place inside it changed, or a bad line instead."""
    if rnd.random() < 0.1:
        return rnd.choice(BAD_LINES)
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):  # a bad line put there by an earlier mutation
        return line
    # Non-ASCII written raw (a lone surrogate becomes bytes that are not UTF-8) or \\u-escaped.
    return json.dumps(mutated(value, rnd), ensure_ascii=rnd.random() < 0.5)


def admitted_json_line(line: str, rnd: random.Random) -> str:
    """A recording event with one field its spec names set to a value the spec admits."""
    try:
        event = json.loads(line)
    except (ValueError, RecursionError):
        return line
    if not isinstance(event, dict):
        return line
    return json.dumps(with_one_extreme(event, rnd), ensure_ascii=rnd.random() < 0.5)


def admitted_md_line(md: str, rnd: random.Random) -> str:
    """A log record's metadata with one field (compile context or body) set to an admitted value."""
    try:
        value = json.loads(md)
    except (ValueError, RecursionError):
        return md
    if not isinstance(value, dict):
        return md
    edited = with_one_extreme({"kind": "trace", "md": value}, rnd)["md"]
    return json.dumps(edited, ensure_ascii=rnd.random() < 0.5)


# ------------------------------------------------------------------ mutated inputs
# Hypothesis chooses the input, how many mutations, where and which kind; a seed per mutation
# drives the details (few draws per example keep 10,000 examples affordable).

SEEDS = st.integers(0, 2**32 - 1)


@st.composite
def mutated_log(draw: st.DrawFn, bases: list[Any]) -> list[tuple[str, str, tuple[str, ...]]]:
    base = draw(st.sampled_from(bases))
    records = list(log_records(base)) if base != RANKS else []
    if base == RANKS:
        for path in RANK_LOGS:
            records.append(("FILE", path.name, ()))
            records.extend(log_records(path))
    for _ in range(draw(st.integers(1, 4))):
        if not records:
            break
        i = draw(st.integers(0, len(records) - 1))
        op = draw(st.integers(0, 9))
        rnd = random.Random(draw(SEEDS))
        prefix, md, payload = records[i]
        if prefix == "FILE":
            continue
        if op <= 2:
            records[i] = (prefix, mutated_json_line(md, rnd), payload)
        elif op <= 5:  # a value the schema admits, in a field it names
            records[i] = (prefix, admitted_md_line(md, rnd), payload)
        elif op == 6:  # a payload that is not what the event's parser expects
            cut = rnd.randint(0, len(payload))
            text = str(hostile(rnd))
            records[i] = (prefix, md, (*payload[:cut], *(f"\t{ln}\n" for ln in text.splitlines())))
        elif op == 7:  # another record's payload
            records[i] = (prefix, md, rnd.choice(records)[2])
        elif op == 8:  # a record dropped or repeated
            if rnd.random() < 0.5:
                del records[i]
            else:
                records.insert(i, records[i])
        else:  # two records swapped
            j = rnd.randrange(len(records))
            if records[j][0] != "FILE":
                records[i], records[j] = records[j], records[i]
    return records


@st.composite
def mutated_recording(draw: st.DrawFn, with_extra: bool) -> list[str]:
    lines = list(recording_lines(with_extra))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(1, len(lines) - 1))  # the header's own checks are tested elsewhere
        op = draw(st.integers(0, 9))
        rnd = random.Random(draw(SEEDS))
        if op <= 4:
            lines[i] = mutated_json_line(lines[i], rnd)
        elif op <= 7:  # a value the schema admits, in a field it names
            lines[i] = admitted_json_line(lines[i], rnd)
        elif op == 8:
            j = rnd.randrange(1, len(lines))
            lines[i], lines[j] = lines[j], lines[i]
        else:
            lines.insert(i, lines[i])
    return lines


# ------------------------------------------------------------------ the property


def every_view(model: RunModel, render: bool) -> None:
    """Build every view's JSON (the report builds each section's view from the registry, exactly as
    its own command does) and the text the CLI would print; the CUDA-preview views on top. With
    `render`, instead every registered view in every format (slow: one example in RENDER_ONE_IN),
    none of which may print a control byte raw, with JSON that is strict."""
    if render:
        for key, text in every_output(model).items():
            assert not RAW_CONTROL.search(text), (key, RAW_CONTROL.search(text))
            if key.endswith((" json", " sarif")):
                json.loads(text, parse_constant=_refuse)
        return
    rep = report.build_report(model)
    failed = [
        d["unavailable"] for d in rep.docs.values() if "could not be built" in str(d.get("unavailable"))
    ]
    assert not failed, failed
    json_text(report.to_json(rep), indent=None).encode("utf-8")
    if model.source_kind == "recording":  # the CUDA preview's views read recorder events only
        json_text(fusion_view.to_json(fusion_view.build_fusion(model, device="cuda:sm_90")), indent=None)


def _refuse(token: str) -> Any:
    raise AssertionError(f"not strict JSON: {token}")


def work_dir(factory: Any, name: str) -> Path:
    """One directory per test, its files overwritten by each example (a directory each is slow)."""
    where = factory.getbasetemp() / name
    where.mkdir(exist_ok=True)
    return where


def read_and_view(load: Any, path: Path, kind: str, render: bool = False) -> None:
    try:
        model = build_model(load(path), kind)
    except TcxError:
        return  # a clear error with its exit code (e.g. no trace events left at all)
    every_view(model, render)


def test_real_inputs_fit_the_schema(tmp_path):
    """The unmutated inputs lose no event to validation (the problems below are the mutations')."""
    for path in [p for group in LOG_GROUPS.values() for p in group if p != RANKS] + RANK_LOGS:
        assert not [p for p in load_trace(path).problems if "malformed" in p], path
    lines = recording_lines(True)
    assert '"kind": "what_if"' in "\n".join(lines) and '"kind": "cuda_preview"' in "\n".join(lines)
    path = tmp_path / "with_extra.tcx"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    rec = load_recording(path)
    assert rec.problems == [] and len(rec.events) == len(lines) - 1


@pytest.mark.parametrize("group", list(LOG_GROUPS))
def test_mutated_logs_never_raise(tmp_path_factory, group):
    examples = itertools.count()

    @settings(max_examples=LOG_EXAMPLES[group], **FUZZ_SETTINGS)
    @given(records=mutated_log(LOG_GROUPS[group]))
    def check(records: list[tuple[str, str, tuple[str, ...]]]) -> None:
        files: list[tuple[str, list[str]]] = [("trace.log", [])]
        for prefix, md, payload in records:
            if prefix == "FILE":
                files.append((md, []))
            else:
                files[-1][1].extend((prefix, md, "\n", *payload))
        where = work_dir(tmp_path_factory, f"fuzz-{group}")
        for name, parts in files[-2:] if len(files) > 1 else files:
            (where / name).write_text("".join(parts), encoding="utf-8", errors="surrogatepass")
        target = where if len(files) > 1 else where / "trace.log"
        read_and_view(load_trace, target, "trace", next(examples) % RENDER_ONE_IN == 0)

    check()


@pytest.mark.parametrize("with_extra", [False, True], ids=["recording", "recording+what_if+cuda_preview"])
def test_mutated_recordings_never_raise(tmp_path_factory, with_extra):
    examples = itertools.count()

    @settings(max_examples=RECORDING_EXAMPLES, **FUZZ_SETTINGS)
    @given(lines=mutated_recording(with_extra))
    def check(lines: list[str]) -> None:
        path = work_dir(tmp_path_factory, f"fuzz-rec-{with_extra}") / "run.tcx"
        path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
        read_and_view(load_recording, path, "recording", next(examples) % RENDER_ONE_IN == 0)

    check()


# ------------------------------------------------------------------ round three (issue 36)
# The same property on three more inputs from anywhere: the arguments an MCP client sends, a
# baseline file committed to a repository, and the program source `tcx fix` rewrites. Nothing may
# raise but tcx's own errors; the MCP server opens no file outside its root; a rewrite is Python
# that keeps every line number.

MCP_EXAMPLES = 200
BASELINE_EXAMPLES = 300
SOURCE_EXAMPLES = 150
LONG_NAME = "n" * 300  # longer than a file name may be
UP = os.pardir  # `..` in hostile targets: they climb out of the fuzz's root, within its tmp folder
# What a target may be made of: the root's own inputs, links out of it, names the OS refuses.
TARGET_BASES = [
    "run.tcx.gz",
    "loop.log.gz",
    "logs",
    "link.tcx",
    "pw",
    "out",
    "out/secret.tcx.gz",
    f"{UP}/outside/secret.tcx.gz",
    "missing.tcx",
    "",
    ".",
    "..",
    LONG_NAME,
    "x\0y",
    "/etc/passwd",
]
TARGET_SUFFIXES = ["", ":f", ":g", ":a.b", ":a.b.c", "::", ":1", ":-", f":{LONG_NAME}", ":\0", ":/etc/passwd"]
NUMBERS = [0, 1, 3, 3.0, 3.5, -1, 2**63, 1e300, 10**400, float("nan"), True, None, "3"]


@functools.cache
def mcp_root(base: Path) -> tuple[Path, Path]:
    """(root, outside): the root holds a recording, a log and a log folder, and links to outside."""
    root, outside = base / "root", base / "outside"
    for folder in (root / "logs", outside):
        folder.mkdir(parents=True)
    shutil.copy(RECORDING, root / "run.tcx.gz")
    shutil.copy(LOOP_LOG, root / "loop.log.gz")
    shutil.copy(LOOP_LOG, root / "logs" / "rank_0.log.gz")
    shutil.copy(RECORDING, outside / "secret.tcx.gz")
    (outside / "passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    (root / "link.tcx").symlink_to(outside / "secret.tcx.gz")
    (root / "pw").symlink_to(outside / "passwd")
    (root / "out").symlink_to(outside, target_is_directory=True)
    (root / "logs" / "leak.log").symlink_to(outside / "passwd")  # a link inside a log folder
    return root, outside


@st.composite
def mcp_call(draw: st.DrawFn, root: Path) -> tuple[str, dict[str, Any]]:
    name = draw(st.sampled_from(["explain", "list_compiles", "show_source", "guards", "recompiles"]))
    base, suffix = draw(st.sampled_from(TARGET_BASES)), draw(st.sampled_from(TARGET_SUFFIXES))
    where = draw(st.sampled_from([f"{root}/", "", f"{root}/logs/{UP}/"]))
    args: dict[str, Any] = {"target": f"{where}{base}{suffix}"}
    extra = {
        "function": st.sampled_from(["f", "a.b", f"{UP}/pw", "\0", "", LONG_NAME]),
        "compile": st.lists(st.sampled_from(["0/0", "1/0", "9/9", "0/0-1/0", "", "x"]), max_size=3),
        "kernel": st.sampled_from(["", "triton", "\0"]),
        "rank": st.lists(st.sampled_from(NUMBERS), max_size=2),
        "file": st.sampled_from(["tiny.py", "/etc/passwd", "", "py", "\0"]),
        "line": st.sampled_from(NUMBERS),
        "context": st.sampled_from(NUMBERS),
        "bogus": st.just(1),
    }
    for key in draw(st.sets(st.sampled_from(list(extra)), max_size=3)):
        args[key] = draw(extra[key])
    if name == "show_source" and "file" not in args:
        args["file"] = "tiny.py"
    return name, args


def test_hostile_mcp_arguments_are_answered_inside_the_root(tmp_path_factory):
    """Every answer is a document or a ToolError, and no file outside the root is opened (an audit
    hook sees every open of this process while a call runs)."""
    from tcx.cli.mcp_tools import Policy, ToolError, call, tools

    root, outside = mcp_root(tmp_path_factory.mktemp("mcp"))
    policy = Policy(roots=(os.path.realpath(root),), allow_run=False)
    table = {t.name: t for t in tools(policy)}
    opened = _audited_opens()

    @settings(max_examples=MCP_EXAMPLES, **FUZZ_SETTINGS)
    @given(request=mcp_call(root))
    def check(request: tuple[str, dict[str, Any]]) -> None:
        name, args = request
        opened.clear()
        opened.append("")  # recording
        try:
            json_text(call(table[name], args, policy))
        except ToolError:
            pass
        finally:
            seen = opened[1:]
            opened.clear()
        assert not [p for p in seen if p.startswith(str(outside))], (args, seen)

    check()


_OPENS: list[str] = []


def _audit_open(event: str, args: tuple[Any, ...]) -> None:
    if _OPENS and event == "open" and args and isinstance(args[0], (str, bytes)):
        _OPENS.append(os.path.realpath(os.fsdecode(args[0])))


@functools.cache
def _audited_opens() -> list[str]:
    """The list the audit hook appends opened paths to while it is not empty (installed once)."""
    sys.addaudithook(_audit_open)
    return _OPENS


@functools.cache
def real_baseline() -> str:
    """The baseline `tcx check --write-baseline` writes for torch's demo log, as JSON text."""
    from tcx.core.views.run_facts import BASELINE_SCHEMA, run_facts

    facts = run_facts(build_model(load_trace(DATA / "traces" / "torch2.13_eager_demo.log.gz"), "trace"))
    facts.schema = BASELINE_SCHEMA
    return json.dumps(facts.to_json())


@st.composite
def mutated_baseline(draw: st.DrawFn) -> str:
    """The real baseline with a few places changed: numbers the JSON admits where a count or a time
    is (400 digits, NaN, negative, fractional), then mutations of any place; or a line that is not JSON."""
    if draw(st.integers(0, 9)) == 0:
        return draw(st.sampled_from(BAD_LINES))
    doc = json.loads(real_baseline())
    places = [("counts", k) for k in doc["counts"]] + [("compile_time_s", "total"), ("compile_time_s", "x")]
    for section, key in draw(st.lists(st.sampled_from(places), max_size=3)):
        doc[section][key] = draw(st.sampled_from(BASELINE_NUMBERS))
    for _ in range(draw(st.integers(0, 3))):
        doc = mutated(doc, random.Random(draw(SEEDS)))
    return json.dumps(doc, ensure_ascii=draw(st.booleans()))


BASELINE_NUMBERS = [10**400, -(10**30), float("nan"), float("inf"), 1e308, -1, 2.5, 2**63, 0, 7]


def test_mutated_baselines_never_raise(tmp_path_factory):
    """A baseline read by `check --baseline` and as a side of `diff`, compared with the log it was
    written from and printed in every format `diff` has: a clear error (a TcxError) or output, with
    strict JSON; never an OverflowError or a RecursionError (exit 5)."""
    from tcx.core.views.check import compare_baseline
    from tcx.core.views.diff import diff
    from tcx.core.views.explain import explain
    from tcx.core.views.registry import get
    from tcx.core.views.run_facts import baseline_file, run_facts
    from tcx.renderers.formats import write

    model = build_model(load_trace(DATA / "traces" / "torch2.13_eager_demo.log.gz"), "trace")
    ex, facts, view = explain(model), run_facts(model), get("diff")
    where = work_dir(tmp_path_factory, "fuzz-baselines") / "base.json"

    @settings(max_examples=BASELINE_EXAMPLES, **FUZZ_SETTINGS)
    @given(text=mutated_baseline())
    def check(text: str) -> None:
        where.write_text(text, encoding="utf-8", errors="surrogatepass")
        try:
            compare_baseline(str(where), ex)
            side = baseline_file(str(where))
        except TcxError:
            return
        if side is None:  # not a baseline: `diff` reads it as a recording or a log
            return
        result = diff(side, facts)
        for fmt in view.formats:
            printed = _printed(lambda console, fmt=fmt: write(view, result, fmt, console, None))
            assert not RAW_CONTROL.search(printed), fmt
            if fmt == "json":
                json.loads(printed, parse_constant=_refuse)

    check()


def _printed(render: Any) -> str:
    """What `render(console)` prints (console and stdout), colour off, as in a pipe."""
    import contextlib
    import io

    from tcx.renderers.console import make_console

    sink, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out):
        render(make_console(sink, color=False, width=100))
    return sink.getvalue() + out.getvalue()


# Programs around the four shapes tcx fix rewrites, made hostile: an encoding (a coding cookie, a
# BOM), line ends, characters str.splitlines splits at and Python does not, long lines, tabs and
# form feeds in indentation, nested functions, many calls, NUL bytes and undecodable bytes.
SPLITS_ONLY = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]
SHAPES = {
    "cond": (
        "@torch.compile\ndef f(x):\n    y = x * 2{c}\n    if y.sum() > 0:{c}\n        y = y + 1{c}\n"
        "{else_}    return y\n"
    ),
    "guard": (
        "@torch.compile\ndef f(x, c):\n    n = c.item(){c}\n    if n < 0:{c}\n"
        "        raise ValueError('negative'){c}\n    return x * n\n"
    ),
    "print": "@torch.compile\ndef f(x):\n    y = x.sin(){c}\n    print('y:', y){c}\n    return y\n",
    "helper": (
        "\ndef helper(x):{c}\n    return x + len(str(x)){c}\n\n\n@torch.compile\ndef f(x):\n"
        "    return helper(x)\n"
    ),
}
ELSE = ["", "    else:\n        y = y - 1\n"]
ABOVE = ["\x0c", "{c}", f"DATA = '{'x' * 200_000}'", "X = (((((1)))))", "\t", ""]


@st.composite
def hostile_program(draw: st.DrawFn) -> tuple[bytes, str, str]:
    """(the file's bytes, its shape, the encoding it was written in)."""
    shape = draw(st.sampled_from(list(SHAPES)))
    encoding = draw(st.sampled_from(["utf-8", "utf-8-sig", "latin-1", "cp1252"]))
    chars = [c for c in SPLITS_ONLY if _encodable(c, encoding)]
    comment = "  # " + "".join(draw(st.lists(st.sampled_from([*chars, "é", "x", "\t"]), max_size=6)))
    c = draw(st.sampled_from(["", comment]))
    body = SHAPES[shape].format(c=c, else_=draw(st.sampled_from(ELSE)))
    if draw(st.booleans()):  # nested one level: the rewrite must find the innermost function
        inner = "".join(f"    {ln}" if ln.strip() else ln for ln in body.splitlines(True))
        body = f"def outer():\n{inner}    return f\n\n\nf = outer()\n"
    calls = draw(st.integers(0, 120)) if shape == "print" else draw(st.integers(0, 2))
    above = [a.format(c=comment) for a in draw(st.lists(st.sampled_from(ABOVE), max_size=4))]
    called = [f"out = f(torch.ones(2)){comment if i % 7 == 0 else ''}" for i in range(calls)]
    text = "\n".join(["import torch", *above, "", body, *called, ""])
    end = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    text = text.replace("\n", end)
    if encoding in ("latin-1", "cp1252") or draw(st.booleans()):
        text = f"# -*- coding: {encoding} -*-{end}" + text
    data = text.encode(encoding, errors="replace")
    damage = draw(st.sampled_from([None, None, None, b"\0", b"\xff\xfe", b"\xc3"]))
    if damage:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + damage + data[at:]
    return data, shape, encoding


def _encodable(char: str, encoding: str) -> bool:
    try:
        char.encode(encoding)
    except UnicodeEncodeError:
        return False
    return True


def test_hostile_sources_get_a_rewrite_that_keeps_every_line_or_a_reason(tmp_path_factory):
    """Each rewriter at each line of the program: a Rewrite, a list of them, or why not; never an
    exception. A rewrite is Python (it compiles as the interpreter reads the file) with as many
    lines as the program, in the program's encoding."""
    from test_fix_rewrites import site

    from tcx.core import pysource
    from tcx.core.fix import source_file
    from tcx.core.fix.check_rewrite import check_rewrite
    from tcx.core.fix.helper_rewrite import helper_rewrites
    from tcx.core.fix.print_rewrite import print_rewrite
    from tcx.core.fix.rewrites import Rewrite, cond_rewrite

    path = work_dir(tmp_path_factory, "fuzz-sources") / "program.py"
    made: Counter[str] = Counter()
    symnode = "attempted to jump with SymNodeVariable()"

    @settings(max_examples=SOURCE_EXAMPLES, **FUZZ_SETTINGS)
    @given(program=hostile_program())
    def check(program: tuple[bytes, str, str]) -> None:
        data, shape, _ = program
        path.write_bytes(data)
        try:
            text, encoding = pysource.decode(data)
            compile(data, str(path), "exec")
            lines = pysource.lines(text)
        except (SyntaxError, ValueError):
            lines, encoding = None, None  # Python refuses it: so must every rewriter (with a reason)
        count = len(lines) if lines else data.count(b"\n") + 1
        for line in range(1, min(count, 40) + 1):
            answers: list[Any] = []
            with source_file.budget():
                answers.append(cond_rewrite(str(path), line))
                answers.append(check_rewrite(site(path, line, debug=symnode)))
                answers.append(print_rewrite(site(path, line)))
                answers.append(helper_rewrites(site(path, line, stack=((line + 3, "f"), (line, "helper")))))
            for answer in [a for made in answers for a in (made if isinstance(made, list) else [made])]:
                if isinstance(answer, str):
                    continue
                assert isinstance(answer, Rewrite) and lines is not None, answer
                assert answer.encoding == encoding
                compile(answer.data, str(path), "exec")  # still Python, read as Python reads the file
                assert len(pysource.lines(answer.text)) == len(lines), shape  # every line keeps its number
                made[shape] += 1

    check()
    assert set(made) == set(SHAPES), made  # every shape was rewritten somewhere: the property was tested
