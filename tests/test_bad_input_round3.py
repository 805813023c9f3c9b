"""Bad input, round three (issue 36): the twelve defects of the third hostile-input round, each a
test of the rule behind it.

1, 6. `tcx mcp` applies one path policy to the real path of the file TARGET resolution opens (split
   as resolution splits it): a link out of the root is refused whatever the suffix; a NUL byte, a
   name too long and `line: 3.0` are answered, never internal errors.
2. Files tcx writes replace what is there, never write through a link (`tcx fix --apply`).
3. A program that silences torch's trace is lost capture (exit 4) from tcx's own hooks.
4, 5, 7, 8. Every reader maps the failures it can raise to the documented exit code: a bad deflate
   stream, a name too long, a file that vanishes after the listing, a walk of `/`, baselines with a
   400-digit time, a count that is no count, 100,000-deep nesting.
9, 10, 12. `tcx fix` reads source as Python does (coding cookie, BOM, the tokenizer's lines) and in
   bounded time (a 2 MB line).
11. Every pattern tcx applies to payload text runs in time linear in it.

Torch runs: item 3 (one `tcx check`, and the session's demo recording); `tcx fix` end to end on the
latin-1 program of tests/data/round3 is tests/test_fix.py's torch.cond run (no run of its own). The
MCP tools are called as the server calls them (cli/mcp_tools.call); everything else is in-process
on the repository's real inputs, edited as named.
"""

from __future__ import annotations

import gc
import gzip
import importlib
import json
import os
import pkgutil
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from conftest import PROGRAMS, REPO, run_tcx, tool, torch_trace_records

from tcx.core import pysource
from tcx.core.errors import EXIT_INPUT, EXIT_USAGE, InputError, TcxError, UsageError
from tcx.core.fix import source_file
from tcx.core.fix.rewrites import cond_rewrite, write_patch
from tcx.core.ingest.recording import load_recording
from tcx.core.ingest.trace_log import load_trace
from tcx.core.model import build_model

DATA = REPO / "tests" / "data"
ROUND3 = DATA / "round3"
RECORDING = DATA / "recordings" / "tiny.tcx.gz"
LOOP_LOG = DATA / "traces" / "torch2.13_eager_loop_break.log.gz"
DEMO_LOG = DATA / "traces" / "torch2.13_eager_demo.log.gz"
LONG = "a" * 300  # a file name longer than the OS allows (255 bytes on Linux)


def tcx_here(capsys: Any, *args: str) -> tuple[int, str, str]:
    """`tcx ARGS` in this process (no interpreter start): exit code, stdout, stderr."""
    from tcx.cli.main import main

    thresholds = gc.get_threshold()  # main() sets the collector's for a long-lived model
    try:
        with pytest.raises(SystemExit) as stopped:
            main(list(args))
    finally:
        gc.set_threshold(*thresholds)
    out = capsys.readouterr()
    code = stopped.value.code
    return code if isinstance(code, int) else 0, out.out, out.err


def assert_clean(code: int, err: str, expected: int, *needles: str) -> None:
    assert code == expected, (code, err[-2000:])
    assert "Traceback" not in err and "internal error" not in err, err[-2000:]
    for needle in needles:
        assert needle in err, (needle, err[-2000:])


# Every file this process opens while a test asks (an audit hook sees builtins.open, io.open and
# os.open alike); the hook stays installed, and records only while a test holds the list.
_OPENED: list[str] | None = None
_HOOKED = False


def _audit(event: str, args: tuple[Any, ...]) -> None:
    if _OPENED is not None and event == "open" and args and isinstance(args[0], (str, bytes)):
        _OPENED.append(os.path.realpath(os.fsdecode(args[0])))


@pytest.fixture
def opened_files() -> Any:
    global _OPENED, _HOOKED
    if not _HOOKED:
        sys.addaudithook(_audit)
        _HOOKED = True
    _OPENED = []
    try:
        yield _OPENED
    finally:
        _OPENED = None


# ------------------------------------------------------------------ 1, 6: the MCP server's one path policy


@pytest.fixture
def mcp_root(tmp_path: Path) -> dict[str, Path]:
    """A root with a recording and a log, and links out of it: to a recording, a log and a file."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    shutil.copy(RECORDING, root / "run.tcx.gz")
    shutil.copy(RECORDING, outside / "secret.tcx.gz")
    shutil.copy(LOOP_LOG, outside / "secret.log.gz")
    (outside / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (root / "link.tcx").symlink_to(outside / "secret.tcx.gz")
    (root / "log.gz").symlink_to(outside / "secret.log.gz")
    (root / "pw").symlink_to(outside / "passwd")
    (root / "out").symlink_to(outside, target_is_directory=True)
    return {"root": root, "outside": outside}


def _mcp(root: Path) -> tuple[Any, Any]:
    from tcx.cli.mcp_tools import Policy, tools

    policy = Policy(roots=(os.path.realpath(root),), allow_run=False)
    return policy, {t.name: t for t in tools(policy)}


def _answer(called: Any, args: dict[str, Any], policy: Any) -> tuple[str, Any]:
    """("ok", document) or ("refused", message): a tool call's answer; anything else fails the test."""
    from tcx.cli.mcp_tools import ToolError, call

    try:
        return "ok", call(called, args, policy)
    except ToolError as exc:
        return "refused", str(exc)


LINKED_TARGETS = [
    "link.tcx",
    "link.tcx:a.b",  # the dotted suffix that passed the old check (it split on an identifier only)
    "link.tcx:f",
    "link.tcx:a.b.c",
    "log.gz:a.b",
    "pw",
    "pw:a.b",
    "out/secret.tcx.gz",
    "out/secret.tcx.gz:a.b",
    f"out/{os.pardir}/out/secret.log.gz:x.y",  # `..` inside tmp_path's root: a hostile spelling
]


@pytest.mark.parametrize("name", ["explain", "list_compiles", "show_source", "guards"])
def test_mcp_refuses_every_link_out_of_its_root_before_opening_it(mcp_root, opened_files, name):
    root, outside = mcp_root["root"], mcp_root["outside"]
    policy, tools = _mcp(root)
    asks = [{"target": str(root / t)} for t in LINKED_TARGETS]
    asks += [
        {"target": str(root / "link.tcx"), "function": "a.b"},
        {"target": str(root / "pw"), "function": "g.h"},
    ]
    for args in asks:
        if name == "show_source":  # no `function` argument: the suffix is written into the target
            function = args.pop("function", None)
            args = {"target": args["target"] + (f":{function}" if function else ""), "file": "tiny.py"}
        outcome, answer = _answer(tools[name], args, policy)
        assert outcome == "refused" and "outside the folders" in answer, (args, answer)
    assert not [p for p in opened_files if p.startswith(str(outside))], opened_files
    # The same tools read the root's own recording, through the same policy.
    args = {"target": str(root / "run.tcx.gz"), **({"file": "tiny.py"} if name == "show_source" else {})}
    outcome, doc = _answer(tools[name], args, policy)
    assert outcome == "ok", doc


def test_the_policy_checks_the_file_resolution_reads(mcp_root):
    """For every spelling, the path the policy checks is the one resolution opens (split the same way)."""
    from tcx.cli.mcp_tools import check_target
    from tcx.core.run.targets import resolve_target

    root = mcp_root["root"]
    policy, _ = _mcp(root)
    for suffix in ("", ":f", ":a.b", ":a.b.c", ":_x9.y_"):
        target = check_target(str(root / "run.tcx.gz") + suffix, policy)
        plain = resolve_target(str(root / "run.tcx.gz") + suffix)
        assert (target.path, target.function) == (plain.path, plain.function)
        assert target.path == os.path.realpath(root / "run.tcx.gz")


def test_mcp_answers_a_nul_byte_a_long_name_and_whole_numbers_as_floats(mcp_root):
    root = mcp_root["root"]
    policy, tools = _mcp(root)
    run = str(root / "run.tcx.gz")
    for args in ({"target": f"{root}/x\0y.tcx"}, {"target": run, "function": "f\0"}):
        outcome, answer = _answer(tools["explain"], args, policy)
        assert outcome == "refused" and "NUL byte" in answer, answer
    outcome, answer = _answer(tools["explain"], {"target": f"{root}/{LONG}.tcx"}, policy)
    assert outcome == "refused" and "File name too long" in answer, answer
    outcome, answer = _answer(tools["explain"], {"target": f"{root}/{LONG}.tcx:a.b"}, policy)
    assert outcome == "refused" and "File name too long" in answer, answer
    # JSON Schema counts 3.0 as an integer: the tool gets 3 (was a TypeError).
    snapshot = json.loads(gzip.decompress(RECORDING.read_bytes()).split(b"\n")[-2])
    assert snapshot["kind"] == "source"
    outcome, doc = _answer(
        tools["show_source"], {"target": run, "file": "tiny.py", "line": 3.0, "context": 1.0}, policy
    )
    assert outcome == "ok", doc
    lines = pysource.line_texts(snapshot["text"])
    assert doc["lines"] == [{"line": n, "text": lines[n - 1]} for n in (2, 3, 4)]
    outcome, answer = _answer(tools["show_source"], {"target": run, "file": "tiny.py", "line": 3.5}, policy)
    assert outcome == "refused" and "invalid arguments" in answer
    outcome, answer = _answer(tools["explain"], {"target": run, "rank": [0.0]}, policy)
    assert outcome == "refused" and "no rank 0" in answer, answer  # an int reached the selector


# ------------------------------------------------------------------ 2: never write through a link


def _branch_rewrite(folder: Path, name: str = "branch.py") -> Any:
    program = folder / name
    shutil.copy(PROGRAMS / "data_dependent_if.py", program)
    rewrite = cond_rewrite(str(program), 9)
    assert not isinstance(rewrite, str), rewrite
    return rewrite


def test_a_patch_replaces_a_link_and_never_writes_its_target(tmp_path):
    rewrite = _branch_rewrite(tmp_path)
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    patch = Path(rewrite.file + ".tcx.patch")
    patch.symlink_to(victim)
    assert write_patch(rewrite) == patch
    assert victim.read_text() == "keep me\n"  # was overwritten with the patch
    assert not patch.is_symlink() and patch.read_bytes() == rewrite.patch_data()
    # A dangling link: its target is not created.
    patch.unlink()
    patch.symlink_to(tmp_path / "created.txt")
    write_patch(rewrite)
    assert not (tmp_path / "created.txt").exists() and not patch.is_symlink()
    assert not list(tmp_path.glob(".*partial"))  # no temporary file left


def test_output_paths_are_replaced_not_written_through(tmp_path, capsys):
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    out = tmp_path / "report.html"
    out.symlink_to(victim)
    code, _, err = tcx_here(capsys, "report", str(RECORDING), "--format", "html", "-o", str(out))
    assert_clean(code, err, 0)
    assert victim.read_text() == "keep me\n" and not out.is_symlink() and "<html" in out.read_text()
    baseline = tmp_path / "base.json"
    baseline.symlink_to(victim)
    code, _, err = tcx_here(capsys, "check", str(DEMO_LOG), "--write-baseline", str(baseline))
    assert_clean(code, err, 0)
    assert (
        victim.read_text() == "keep me\n" and json.loads(baseline.read_text())["schema"] == "tcx.baseline/1"
    )


def test_record_save_replaces_a_link_in_its_folder(tmp_path):
    """`tcx record --save DIR` copies each rank's log into DIR: a link there already is replaced.
    The command writes its log itself (no torch: the copy is what is tested)."""
    victim, keep = tmp_path / "victim.txt", tmp_path / "keep"
    victim.write_text("keep me\n")
    keep.mkdir()
    (keep / "rank0.log").symlink_to(victim)
    record = "V1203 13:22:34.735000 6482 x.py:1] " + json.dumps({"str": ["a", 1]}) + "\n"
    code = f"import os; open(os.environ['TORCH_TRACE'] + '/rank0.log', 'w').write({record!r})"
    proc = run_tcx("record", "--save", str(keep), "--", sys.executable, "-c", code)
    assert proc.returncode == 0, proc.stderr
    assert victim.read_text() == "keep me\n"
    assert not (keep / "rank0.log").is_symlink() and (keep / "rank0.log").read_text() == record


# ------------------------------------------------------------------ 3: lost capture from tcx's own hooks


@pytest.mark.torch
def test_check_fails_when_the_program_silences_torchs_trace(tmp_path):
    """A live run (what is tested is the recorder's hooks): `torch._logging.trace_structured` replaced
    with a no-op, then a graph break. Was "graph breaks: 0, check passed", exit 0."""
    save = tmp_path / "silenced.tcx"
    target = str(PROGRAMS / "broken" / "trace_silenced.py")
    proc = run_tcx("check", target, "--max-graph-breaks", "0", "--save", str(save))
    assert proc.returncode == EXIT_INPUT, proc.stdout + proc.stderr
    assert "capture was lost" in proc.stderr and "compile ids 0/0, 1/0" in proc.stderr, proc.stderr
    assert "trace_structured" in proc.stderr and "check passed" not in proc.stdout
    assert "Traceback" not in proc.stderr
    rec = load_recording(save)
    seen = [e["compile_id"] for e in rec.of_kind("compile_seen")]
    assert seen == ["0/0", "1/0"]  # the frame, and its resume function after the break
    (brk,) = rec.of_kind("graph_break")
    printed = pysource.line_texts(Path(target).read_text()).index('    print("graph break")') + 1
    assert brk["compile_id"] == "0/0" and brk["user_stack"][-1]["line"] == printed
    names = {next(iter(e["md"])) for e in rec.of_kind("trace")}
    assert "dynamo_start" not in names and "describe_tensor" in names  # ids without their compile
    assert build_model(rec, "recording").status.lost_compiles == ("0/0", "1/0")
    # Without the graph-break hook's event, the compile hook alone still shows it.
    events = [e for e in rec.events if e.get("kind") != "graph_break"]
    edited = tmp_path / "no_break_event.tcx"
    edited.write_text(
        "".join(json.dumps(e) + "\n" for e in [{"kind": "header", **rec.header}, *events]), encoding="utf-8"
    )
    assert build_model(load_recording(edited), "recording").status.lost_compiles == ("0/0", "1/0")


@pytest.mark.torch
def test_the_compile_hook_sees_exactly_the_compiles_torch_traces(dynamo_recorded):
    """The session's demo recording: one compile_seen per compile id of torch's own log; none lost."""
    run = dynamo_recorded("demo.py")
    rec = load_recording(run.recording)
    seen = [e["compile_id"] for e in rec.of_kind("compile_seen")]
    started = [
        f"{md['frame_id']}/{md['frame_compile_id']}"
        for n, md, _ in torch_trace_records(run.torch_trace)
        if n == "dynamo_start"
    ]
    assert seen and sorted(set(seen)) == sorted(set(started))
    assert build_model(rec, "recording").status.lost_compiles == ()


# ------------------------------------------------------------------ 4, 5, 7: every reader's failures


def _reader_inputs(tmp: Path) -> dict[str, Path | str]:
    """Each failure a reader can meet, by name: broken files, refused paths, a FIFO, an empty folder."""
    gz = gzip.compress(b'{"kind": "header", "format": "tcx-recording", "version": 1}\n' * 100)
    broken = {
        "truncated gzip": gz[: len(gz) // 2],
        "CRC mismatch": gz[:-8] + b"\0\0\0\0" + gz[-4:],
        "bad gzip header": b"\x1f\x8b\x09" + gz[3:],
        "binary garbage": bytes(range(256)) * 8,
        "empty file": b"",
        "nested 100,000 deep": b"[" * 100_000 + b"]" * 100_000 + b"\n",
    }
    out: dict[str, Path | str] = {}
    for i, (name, data) in enumerate(broken.items()):
        for suffix in (".log", ".tcx.gz"):
            path = tmp / f"case{i}{suffix}"
            path.write_bytes(data)
            out[f"{name} {suffix}"] = path
    out["bad deflate stream log"] = ROUND3 / "bad_deflate.log.gz"
    out["bad deflate stream recording"] = ROUND3 / "bad_deflate_recording.gz"
    out["missing"] = tmp / "missing.tcx"
    out["name too long"] = tmp / f"{LONG}.tcx"
    out["name too long, :func"] = f"{tmp}/{LONG}.log:a.b"
    out["NUL byte"] = f"{tmp}/x\0y.log"
    (tmp / "empty_dir").mkdir()
    out["empty directory"] = tmp / "empty_dir"
    os.mkfifo(tmp / "pipe.log")
    out["FIFO"] = tmp / "pipe.log"
    return out


READERS = ["resolve_target", "open_file", "tcx.load", "load_recording", "load_trace", "load_trace eager"]
LOADERS = ("load_recording", "load_trace", "load_trace eager")  # take a path the CLI has resolved
REFUSED_PATHS = ("missing", "name too long", "name too long, :func", "NUL byte", "FIFO")


def _documented(reader: str, name: str) -> int:
    """The exit code docs/exit-codes.md gives `name` read by `reader` (0: read, problems listed)."""
    if reader == "resolve_target":  # resolution names what to read; it reads nothing
        return EXIT_USAGE if name in REFUSED_PATHS else 0
    if name == "bad deflate stream log" and reader != "load_recording":
        return 0  # the records before the bad block are read; the break is listed as a problem
    if name in REFUSED_PATHS and reader not in LOADERS:
        return EXIT_USAGE
    return EXIT_INPUT  # a loader given a path that is no readable input: unreadable input


def _read(reader: str, path: Path | str) -> Any:
    import tcx
    from tcx.core.run.inputs import open_file
    from tcx.core.run.targets import resolve_target

    if reader == "resolve_target":
        return resolve_target(str(path))
    if reader == "open_file":
        return open_file(str(path))
    if reader == "tcx.load":
        return tcx.load(str(path))
    if reader == "load_recording":
        return load_recording(path)
    return build_model(load_trace(path, lazy=reader == "load_trace"), "trace")


@pytest.mark.parametrize("reader", READERS)
def test_every_reader_maps_every_failure_to_its_exit_code(tmp_path, reader):
    """Each reader fed each failure it can meet: a result, or a TcxError with the exit code the
    docs/exit-codes.md documents for that input; never another exception (the CLI's exit 5)."""
    outcomes = {}
    for name, path in _reader_inputs(tmp_path).items():
        if reader in LOADERS and (isinstance(path, str) or name == "FIFO"):
            continue  # resolution refuses these before a loader could see them (or block on a FIFO)
        try:
            _read(reader, path)
            outcomes[name] = 0
        except TcxError as exc:
            outcomes[name] = exc.exit_code
    wrong = {n: c for n, c in outcomes.items() if c != _documented(reader, n)}
    assert not wrong, wrong
    assert len(outcomes) >= 14


def test_a_bad_deflate_stream_is_a_broken_gzip_not_an_internal_error(capsys):
    """A deflate block of reserved type in the middle of real files (tests/data/README.md, round3/)."""
    for lazy in (True, False):
        log = load_trace(ROUND3 / "bad_deflate.log.gz", lazy=lazy)
        assert len(log.events) == 19 and log.problems == [
            "bad_deflate.log.gz: cannot read (Error -3 while decompressing data: invalid block type)"
        ]
    with pytest.raises(InputError, match="invalid block type"):
        load_recording(ROUND3 / "bad_deflate_recording.gz")
    code, _, err = tcx_here(capsys, "explain", str(ROUND3 / "bad_deflate_recording.gz"))
    assert_clean(code, err, EXIT_INPUT, "cannot read", "invalid block type")
    code, out, err = tcx_here(capsys, "explain", str(ROUND3 / "bad_deflate.log.gz"))
    assert_clean(code, err, 0)
    assert "cannot read (Error -3 while decompressing data" in " ".join(out.split())
    import tcx

    with pytest.raises(TcxError) as raised:
        tcx.load(str(ROUND3 / "bad_deflate_recording.gz"))
    assert raised.value.exit_code == EXIT_INPUT


COMMANDS = ["bytecode", "cache", "codegen", "cost", "cudagraphs", "explain", "export", "fix", "fusion"]
COMMANDS += ["graphs", "guards", "recompiles", "report", "show", "trace"]


def test_a_name_too_long_is_a_usage_error_in_every_command(capsys, tmp_path):
    """TARGET, either side of diff, --baseline and the paths tcx writes; was exit 5 (ENAMETOOLONG)."""
    too_long = f"{tmp_path}/{LONG}"
    for command in COMMANDS:
        for target in (f"{too_long}.log", f"{too_long}.py", f"{too_long}.tcx:a.b", too_long):
            code, _, err = tcx_here(capsys, command, target)
            assert_clean(code, err, EXIT_USAGE, "File name too long")
    for a, b in ((f"{too_long}.json", str(DEMO_LOG)), (str(DEMO_LOG), f"{too_long}.tcx")):
        code, _, err = tcx_here(capsys, "diff", a, b)
        assert_clean(code, err, EXIT_USAGE, "File name too long")
    code, _, err = tcx_here(capsys, "check", str(DEMO_LOG), "--baseline", f"{too_long}.json")
    assert_clean(code, err, EXIT_USAGE, "no such baseline", "File name too long")
    for option, extra in (("--write-baseline", ()), ("-o", ())):
        command = "check" if option == "--write-baseline" else "report"
        code, _, err = tcx_here(capsys, command, str(DEMO_LOG), option, f"{too_long}.json", *extra)
        assert_clean(code, err, EXIT_USAGE, f"{option} ", "cannot be written", "File name too long")
    import tcx

    with pytest.raises(UsageError, match="File name too long"):
        tcx.load(f"{too_long}.tcx")


def test_a_log_that_vanishes_after_the_listing_is_reported_and_the_rest_read(tmp_path, monkeypatch):
    from tcx.core.ingest import trace_log

    folder = tmp_path / "logs"
    folder.mkdir()
    logs = [folder / f"dedicated_log_torch_trace_rank_{rank}.log" for rank in (0, 1)]
    alone = load_trace(LOOP_LOG)  # what the surviving file holds
    listed = trace_log._log_files

    def listing_then_gone(path: Path) -> list[Path]:
        files = listed(path)
        files[0].unlink()  # removed between the listing and the read
        return files

    monkeypatch.setattr(trace_log, "_log_files", listing_then_gone)
    for lazy in (True, False):
        for log in logs:
            log.write_bytes(gzip.decompress(LOOP_LOG.read_bytes()))
        rec = load_trace(folder, lazy=lazy)
        assert any("rank_0.log: cannot read" in p and "No such file" in p for p in rec.problems), rec.problems
        assert len(rec.events) == len(alone.events) > 0
    logs[1].unlink()
    logs[0].write_bytes(gzip.decompress(LOOP_LOG.read_bytes()))  # listed alone, then gone: nothing read
    with pytest.raises(InputError, match="no trace events"):
        load_trace(folder)


def test_a_directory_far_bigger_than_a_trace_directory_is_refused_at_once(capsys, tmp_path):
    """`tcx explain /` walked the whole filesystem (49 s) before answering."""
    started = time.monotonic()
    code, _, err = tcx_here(capsys, "explain", "/")
    assert_clean(code, err, EXIT_INPUT, "is not a TORCH_TRACE log directory", "over 10,000")
    assert time.monotonic() - started < 30  # about a second; the bound is that it stops, not how fast
    deep = tmp_path / "a" / "b" / "c" / "d" / "e" / "f"
    deep.mkdir(parents=True)
    shutil.copy(LOOP_LOG, deep / "trace.log.gz")  # deeper than a trace directory goes: not found
    with pytest.raises(InputError, match="holds no TORCH_TRACE logs"):
        load_trace(tmp_path / "a")
    assert load_trace(tmp_path / "a" / "b" / "c").events  # 3 levels down: read


# ------------------------------------------------------------------ 8: baselines


@pytest.fixture(scope="module")
def baseline_doc(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """`tcx check DEMO_LOG --write-baseline`: a real baseline of torch's demo log."""
    path = tmp_path_factory.mktemp("baseline") / "base.json"
    proc = run_tcx("check", str(DEMO_LOG), "--write-baseline", str(path))
    assert proc.returncode == 0, proc.stderr
    return json.loads(path.read_text())


BASELINE_FORMATS = {"check": ("text", "json", "sarif", "github"), "diff": ("text", "json", "markdown")}


def _with_baseline(capsys: Any, path: Path) -> dict[str, tuple[int, str, str]]:
    out = {}
    for fmt in BASELINE_FORMATS["check"]:
        out[f"check {fmt}"] = tcx_here(
            capsys, "check", str(DEMO_LOG), "--baseline", str(path), "--format", fmt
        )
    for fmt in BASELINE_FORMATS["diff"]:
        out[f"diff {fmt}"] = tcx_here(capsys, "diff", str(path), str(DEMO_LOG), "--format", fmt)
    return out


def test_a_compile_time_of_400_digits_is_no_time(capsys, tmp_path, baseline_doc):
    """Was an OverflowError (exit 5) in diff and check --baseline, in every format."""
    doc = {**baseline_doc, "compile_time_s": {"total": int("9" * 400), "backend": 1.5, "nan": float("nan")}}
    path = tmp_path / "huge_time.json"
    path.write_text(json.dumps(doc))
    for key, (code, out, err) in _with_baseline(capsys, path).items():
        assert_clean(code, err, 0)
        if key == "diff json":  # the times that are no time are left out of A's side
            times = json.loads(out)["compile_time_s"]
            assert times["backend"]["a"] == 1.5 and "nan" not in times, times
            assert times.get("total", {}).get("a") is None, times


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        (lambda d: d["counts"].update(graph_count=int("9" * 400)), "counts.graph_count is not a count"),
        (lambda d: d["counts"].update(recompile_count=-1), "counts.recompile_count is not a count"),
        (lambda d: d["counts"].update(graph_break_count=2.5), "counts.graph_break_count is not a count"),
        (
            lambda d: d.update(graph_breaks=[{"type": "x", "occurrences": 10**30}]),
            "occurrences is not a count",
        ),
    ],
)
def test_a_count_that_is_no_count_is_an_unreadable_baseline(capsys, tmp_path, baseline_doc, edit, needle):
    doc = json.loads(json.dumps(baseline_doc))
    edit(doc)
    path = tmp_path / "bad_count.json"
    path.write_text(json.dumps(doc))
    for key, (code, _, err) in _with_baseline(capsys, path).items():
        assert_clean(code, err, EXIT_INPUT, needle), key


def test_a_baseline_nested_100000_deep_is_an_unreadable_input(capsys, tmp_path):
    """Was a RecursionError (exit 5) in every command that read it."""
    path = tmp_path / "deep.json"
    path.write_text('{"schema": "tcx.baseline/1", "counts": ' + "[" * 100_000 + "]" * 100_000 + "}")
    for key, (code, _, err) in _with_baseline(capsys, path).items():
        assert_clean(code, err, EXIT_INPUT), key
        assert ("nested too deeply" in err) if key.startswith("check") else ("not a tcx recording" in err)


# ------------------------------------------------------------------ 9, 10, 12: source as Python reads it


# Every character str.splitlines splits at that Python's tokenizer keeps inside a line.
SPLITLINES_ONLY = ["\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


def _applied(patch: str, original: bytes, patch_data: bytes, folder: Path) -> bytes:
    """`patch FILE < FILE.tcx.patch` on a copy of the original: the file it leaves."""
    file = folder / "applied.py"
    file.write_bytes(original)
    proc = subprocess.run([patch, "-s", str(file)], input=patch_data, capture_output=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return file.read_bytes()


@pytest.mark.parametrize("char", SPLITLINES_ONLY, ids=lambda c: f"U+{ord(c):04X}")
def test_a_rewrite_keeps_pythons_lines_around_characters_splitlines_splits_at(tmp_path, char):
    """A form feed (or \\v, \\x1c-\\x1e, \\x85, \\u2028, \\u2029) in a comment above the `if`: the
    rewrite replaced the wrong lines (the diff was wrong code, the re-run a SyntaxError)."""
    patch = tool("patch", "applies the patch tcx fix --apply writes")
    source = (
        (PROGRAMS / "data_dependent_if.py")
        .read_text()
        .replace("import torch\n", f"import torch\n# a comment with {char} in it\n\x0c\n")
    )
    program = tmp_path / "program.py"
    program.write_text(source, encoding="utf-8")
    line = next(n for n, text in enumerate(pysource.line_texts(source), 1) if "if y.sum()" in text)
    assert line != next(n for n, text in enumerate(source.splitlines(), 1) if "if y.sum()" in text)
    rewrite = cond_rewrite(str(program), line)
    assert not isinstance(rewrite, str), rewrite
    compile(rewrite.data, str(program), "exec")  # the rewritten copy is Python (was a SyntaxError)
    new = pysource.line_texts(rewrite.text)
    assert len(new) == len(pysource.line_texts(source))  # every line keeps its number
    assert new[line - 1].strip().startswith("return torch.cond(y.sum() > 0, lambda y: y + 1, lambda y: y - 1")
    assert [t for t in new if "a comment with" in t] == [f"# a comment with {char} in it"]  # as it was
    assert _applied(patch, program.read_bytes(), rewrite.patch_data(), tmp_path) == rewrite.data


@pytest.mark.parametrize(
    ("name", "line", "encoding"), [("latin1_branch.py", 13, "iso-8859-1"), ("bom_branch.py", 11, "utf-8-sig")]
)
def test_a_coding_cookie_or_a_bom_is_read_and_written_back(tmp_path, name, line, encoding):
    """Were 'the source could not be read' (UnicodeDecodeError, SyntaxError): no rewrite remedy."""
    patch = tool("patch", "applies the patch tcx fix --apply writes")
    program = tmp_path / name
    shutil.copy(ROUND3 / f"{name}.txt", program)
    rewrite = cond_rewrite(str(program), line)
    assert not isinstance(rewrite, str), rewrite
    assert rewrite.encoding == encoding
    assert rewrite.data.startswith(
        b"\xef\xbb\xbf" if encoding == "utf-8-sig" else b"# -*- coding: latin-1 -*-\n"
    )
    assert "caf\xe9".encode(encoding.replace("-sig", "")) in rewrite.data  # é in the file's own bytes
    compile(rewrite.data, name, "exec")  # Python reads the copy as it reads the file
    assert _applied(patch, program.read_bytes(), rewrite.patch_data(), tmp_path) == rewrite.data


def test_a_two_megabyte_line_is_answered_in_bounded_time(tmp_path):
    """ast.get_source_segment split the whole source a character at a time on every call: over
    400 s on a script with a 2 MB line."""
    body = (PROGRAMS / "data_dependent_if.py").read_text()
    line = next(n for n, text in enumerate(body.splitlines(), 1) if "if y.sum()" in text) + 1
    under = tmp_path / "long_line.py"  # a 900 kB string literal: under the limit, rewritten
    under.write_text(body.replace("import torch\n", f"import torch\nDATA = '{'x' * 900_000}'\n"))
    started = time.monotonic()
    rewrite = cond_rewrite(str(under), line)
    assert not isinstance(rewrite, str), rewrite
    assert time.monotonic() - started < 20  # about 0.1 s; it stops, however slow the machine
    assert pysource.line_texts(rewrite.text)[line - 1].strip().startswith("return torch.cond(")
    over = tmp_path / "longer_line.py"  # 2 MB: over the limit, refused at once with the reason
    over.write_text(body.replace("import torch\n", f"import torch\nDATA = [{'1, ' * 700_000}]\n"))
    started = time.monotonic()
    assert (
        cond_rewrite(str(over), line)
        == f"the file is {over.stat().st_size:,} bytes; tcx fix rewrites files up to 1,000,000"
    )
    assert time.monotonic() - started < 1


def test_a_rewrite_stops_at_its_budget(tmp_path):
    program = tmp_path / "branch.py"
    shutil.copy(PROGRAMS / "data_dependent_if.py", program)
    with source_file.budget(0.0), pytest.raises(source_file.OverBudget):
        cond_rewrite(str(program), 9)
    with source_file.budget():
        assert not isinstance(cond_rewrite(str(program), 9), str)


# ------------------------------------------------------------------ 11: payload patterns are linear

PAYLOAD_MODULES = [m.name for m in pkgutil.iter_modules([str(REPO / "core" / "torchtext")])]
# Text built to make a pattern backtrack: one piece repeated (a long word, blanks, `x.x.x.`, ...).
PIECES = ["a", " ", "\t", "0", "_", "#", "x.", "a: ", "a:", "a,", "(", "[", "'", '"', "s0: VR[1, ", "L['x']"]
PIECES += ["# a"]
SMALL, LARGE = 2_500, 10_000  # characters: 4 times as much text takes about 4 times as long, not 16


def _payload_patterns() -> list[tuple[str, re.Pattern[str]]]:
    modules = [importlib.import_module(f"tcx.core.torchtext.{m}") for m in PAYLOAD_MODULES]
    modules += [
        importlib.import_module(m) for m in ("tcx.core.views.bytecode", "tcx.core.ingest.trace_lines")
    ]
    return [
        (f"{mod.__name__}.{name}", value)
        for mod in modules
        for name, value in vars(mod).items()
        if isinstance(value, re.Pattern) and isinstance(value.pattern, str)
    ]


def _scan_time(pattern: re.Pattern[str], text: str, tries: int = 1) -> float:
    """The fastest of `tries` scans (finditer, then match) of `text`, in this process's CPU seconds: other
    processes on a loaded machine lengthen the wall clock, not the work the scan does."""
    best = float("inf")
    for _ in range(tries):
        started = time.process_time()
        for _ in pattern.finditer(text):
            pass
        pattern.match(text)
        best = min(best, time.process_time() - started)
    return best


def _grows_quadratically(pattern: re.Pattern[str], piece: str) -> tuple[float, float] | None:
    """(small, large) times when 4 times the text took over 10 times as long, measured again as
    the fastest of three tries (a loaded machine slows one scan, not three)."""
    small, large = (_scan_time(pattern, piece * (n // len(piece))) for n in (SMALL, LARGE))
    if large > 0.02 and large > 10 * small:
        small, large = (_scan_time(pattern, piece * (n // len(piece)), tries=3) for n in (SMALL, LARGE))
        if large > 0.02 and large > 10 * small:
            return small, large
    return None


def test_every_payload_pattern_runs_in_linear_time():
    """Each pattern of the payload parsers, searched over 2,500 and 10,000 characters of each hostile
    piece: a quadratic one takes 16 times as long on the larger text (the exported program's ranges
    on a long word: 1.8 s at 10,000; a bytecode row on blanks: minutes), a linear one about 4 times
    (or under 20 ms either way, when the difference is noise)."""
    patterns = _payload_patterns()
    assert len(patterns) > 40
    slow = []
    for name, pattern in patterns:
        for piece in PIECES:
            grows = _grows_quadratically(pattern, piece)
            if grows:
                slow.append((name, piece, *(round(t, 4) for t in grows)))
    assert not slow, slow


def test_an_exported_programs_long_payload_lines_parse_in_linear_time():
    from tcx.core.torchtext.exported_program import parse_exported_program

    for size in (5_000, 40_000, 100_000):
        for text in (
            "ExportedProgram:\nGraph signature:\nRange constraints: {" + "a" * size,
            "ExportedProgram:\nGraph signature:\nRange constraints: {" + "s0: VR[1, " * (size // 10),
            "ExportedProgram:\n        def forward(self, " + "a" * size + "\n",
        ):
            started = time.process_time()  # CPU seconds: a loaded machine does not lengthen them
            parse_exported_program(text)
            assert time.process_time() - started < 1, size  # 220 s at 100k before
