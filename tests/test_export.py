"""`tcx export`: real torch.export runs on the CPU (torch 2.13), checked against torch's own words —
the program's printed `ep.graph_signature`, range constraints and draft-export reports, the
exception types it caught, torch's TORCH_TRACE log of the same run — and the export and
AOTInductor logs of fixtures/torch-trace checked against what `tlparse --export` /
`--inductor-provenance` report for them.

One recording of `fixtures/programs/export/deploy.py` (ten exports) serves most tests.
"""

from __future__ import annotations

import ast
import getpass
import html
import json
import re
import subprocess
from pathlib import Path

import pytest
import tcx_fork
from conftest import PROGRAMS, TRACE_FIXTURES, run_tcx, shared_value, tool, torch_trace_records
from export_truth import EXPORT_LOGS, assert_log_agrees

EXPORT = PROGRAMS / "export"
INPUTS = TRACE_FIXTURES / "tlparse-tests" / "inputs"
TLPARSE_EXPORT_LOGS = sorted(p.name for p in INPUTS.glob("export*.log"))
AOTI_LOGS = sorted(p.name for p in INPUTS.glob("inductor_provenance_aot*"))
ENV = {"NO_COLOR": "1", "COLUMNS": "120", "TERM": "dumb", "FORCE_COLOR": ""}


def source_line(program: Path, marker: str) -> int:
    """The line of `program` whose text contains `marker` (independent of tcx)."""
    lines = program.read_text().splitlines()
    found = [i for i, text in enumerate(lines, start=1) if marker in text]
    assert len(found) == 1, (marker, found)
    return found[0]


def plain_run(program: Path) -> subprocess.CompletedProcess:
    """The program as `python program.py` runs it, without tcx."""
    return tcx_fork.run_python([str(program)], timeout=300)


def printed(stdout: str, label: str) -> object:
    """A Python literal the program printed after `label`."""
    line = next(ln for ln in stdout.splitlines() if ln.startswith(label + " "))
    return ast.literal_eval(line[len(label) + 1 :])


# --- one recording of deploy.py, its torch log, and the program run alone ---------------------------


@pytest.fixture
def deploy() -> dict:
    """Made once per session, whichever xdist worker asks first (conftest.shared_value)."""
    return shared_value("export deploy.py", _deploy)


def _deploy(folder: Path) -> dict:
    (folder / "tmp").mkdir()  # draft_export's own logs go to <tmp>/export_<user>
    proc = run_tcx(
        "export",
        str(EXPORT / "deploy.py"),
        "--format",
        "json",
        "--show-output",
        "--save",
        str(folder / "deploy.tcx"),
        env={**ENV, "TORCH_TRACE": str(folder / "trace"), "TMPDIR": str(folder / "tmp")},
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads(proc.stdout)
    plain = plain_run(EXPORT / "deploy.py")
    assert plain.returncode == 0, plain.stderr[-2000:]
    return {
        "doc": doc,
        "stderr": proc.stderr,
        "saved": folder / "deploy.tcx",
        "trace": folder / "trace",
        "tmp": folder / "tmp",
        "plain": plain,
    }


def runs(doc: dict, name: str, api: str = "export") -> list[dict]:
    return [e for e in doc["exports"] if e["name"] == name and e["api"] == api]


pytestmark = pytest.mark.torch


def test_the_programs_output_is_unchanged(deploy):
    """Every line the program prints alone, it prints under tcx, in the same order."""
    ours = deploy["stderr"].splitlines()
    position = 0
    for line in deploy["plain"].stdout.splitlines():
        assert line in ours[position:], line
        position = ours.index(line, position) + 1


def test_each_failure_is_at_the_users_line_with_torchs_exception(deploy):
    doc, out = deploy["doc"], deploy["plain"].stdout
    program = EXPORT / "deploy.py"
    expected = {  # (name, strict): (kind, marker of the line torch could not trace)
        ("Gate", False): ("data-dependent branch", "# a branch on a tensor's value"),
        ("Gate", True): ("data-dependent branch", "# a branch on a tensor's value"),
        ("PadTo", False): ("data-dependent branch", "# ...then a branch on that size"),
        ("Resize", False): ("specialized dynamic dim", "# pins the batch"),
        ("UsesCustomOp", False): ("missing fake kernel", "# tcxdemo::scale has no fake kernel"),
        ("Timed", True): ("graph break (strict)", "# strict export (Dynamo) will not trace"),
    }
    failed = [e for e in doc["exports"] if e["api"] == "export" and e["ok"] is False]
    assert {(e["name"], e["strict"]) for e in failed} == set(expected)
    for run in failed:
        kind, marker = expected[(run["name"], run["strict"])]
        label = run["name"] + (" strict" if run["strict"] else "")
        caught = re.search(rf"^{label}: failed with (\w+)$", out, re.M)
        assert caught and run["exc_type"].rsplit(".", 1)[-1] == caught.group(1)
        (issue,) = run["failures"]
        assert issue["kind"] == kind
        assert (issue["file"], issue["line"]) == (str(program), source_line(program, marker))
        assert issue["message"] and issue["suggestion"]
    assert doc["failed_export_count"] == 6


def test_a_data_dependent_branch_gets_torch_cond(deploy):
    for run in runs(deploy["doc"], "Gate"):
        (issue,) = run["failures"]
        assert "torch.cond(" in issue["suggestion"]


def test_a_strict_mode_graph_break_suggests_non_strict_export(deploy):
    (timed,) = runs(deploy["doc"], "Timed")
    (issue,) = timed["failures"]
    assert "Attempted to call function marked as skipped" in issue["message"]  # Dynamo's words
    assert "strict=False" in issue["suggestion"]


def test_item_as_a_size_without_and_with_torch_check(deploy):
    doc, out = deploy["doc"], deploy["plain"].stdout
    program = EXPORT / "deploy.py"
    (pad,) = runs(doc, "PadTo")
    (issue,) = pad["failures"]
    assert issue["expr"] == "u0 > 2"  # torch's "Could not guard on data-dependent expression u0 > 2"
    assert "Could not guard on data-dependent expression u0 > 2" in issue["message"]
    made = pad["unbacked_symbols"][0]
    assert made["symbol"] == "u0" and made["code"] == "k = n.item()" and made["file"] == str(program)
    # the user's own name for torch's symbol, as PadToChecked (which exports) writes it
    assert "torch._check(k > 2)" in issue["suggestion"] and "k from `k = n.item()`" in issue["suggestion"]
    (checked,) = runs(doc, "PadToChecked")
    assert checked["ok"] is True and checked["failures"] == []
    ranges = checked["signature"]["range_constraints"]
    # torch's own: PadToChecked ranges {u0: VR[3, int_oo]}
    torch_ranges = re.search(r"^PadToChecked ranges \{(.*)\}$", out, re.M).group(1)
    assert ", ".join(f"{s}: VR[{r['min']}, {r['max']}]" for s, r in ranges.items()) == torch_ranges


def test_a_specialized_dynamic_dim_names_its_guard_and_line(deploy):
    program = EXPORT / "deploy.py"
    line = source_line(program, "# pins the batch")
    (resize,) = runs(deploy["doc"], "Resize")
    (issue,) = resize["failures"]
    assert "specialized it to be a constant (4)" in issue["message"]  # torch's words
    assert "to 4 (guard Eq(s" in issue["suggestion"] and "Dim.AUTO" in issue["suggestion"]
    (spec,) = resize["specializations"]
    assert (spec["sources"], spec["value"]) == (["L['x'].size()[0]"], "4")
    assert spec["guard"]["line"] == line and spec["guard"]["expr"].endswith(", 4)")


def test_a_missing_fake_kernel_gets_a_register_fake_stub_that_compiles(deploy):
    (run,) = runs(deploy["doc"], "UsesCustomOp")
    (issue,) = run["failures"]
    assert "no fake impl registered for <CustomOpDef(tcxdemo::scale)>" in issue["message"]
    assert issue["op"] == "tcxdemo::scale"
    stub = issue["suggestion"].split("\n", 1)[1]
    assert '@torch.library.register_fake("tcxdemo::scale")' in stub
    assert "def _(x, factor):" in stub  # the op's schema: scale(Tensor x, float factor) -> Tensor
    compile(stub.replace("\n    ", "\n").strip(), "stub", "exec")


def test_the_signature_is_ep_graph_signature(deploy):
    doc, out = deploy["doc"], deploy["plain"].stdout
    (tiny,) = runs(doc, "Tiny")
    sig = tiny["signature"]
    inputs = [*sig["parameters"], *sig["buffers"], *sig["constants"], *sig["inputs"]]
    ours = sorted((e["kind"], e["name"], e["target"]) for e in inputs)
    assert ours == sorted(tuple(s) for s in printed(out, "Tiny signature"))
    assert [(e["kind"], e["name"]) for e in sig["outputs"]] == [
        tuple(s) for s in printed(out, "Tiny outputs")
    ]
    assert {e["name"]: e["shape"] for e in inputs}["p_lin_weight"] == ["4", "3"]
    (dim,) = sig["dynamic_dims"]
    torch_ranges = re.search(r"^Tiny ranges \{(\w+): VR\[(\w+), (\w+)\]\}$", out, re.M).groups()
    assert (dim["input"], dim["dim"]) == ("x", 0)
    assert (dim["symbol"], dim["min"], dim["max"]) == torch_ranges


def test_draft_export_reports_what_torchs_report_lists(deploy):
    doc, out = deploy["doc"], deploy["plain"].stdout
    program = EXPORT / "deploy.py"
    for name in ("Gate", "Resize", "UsesCustomOp"):
        (run,) = runs(doc, name, "draft_export")
        assert run["ok"] is True
        assert [f["torch_type"] for f in run["failures"]] == printed(out, f"draft {name} report")
    (gate,) = runs(doc, "Gate", "draft_export")
    assert gate["failures"][0]["line"] == source_line(program, "# a branch on a tensor's value")
    assert gate["failures"][0]["kind"] == "data-dependent branch"
    (resize,) = runs(doc, "Resize", "draft_export")
    assert resize["failures"][0]["kind"] == "specialized dynamic dim"
    assert resize["signature"]["inputs"][0]["shape"] == ["4", "3"]  # draft kept it static (Dim.AUTO)
    (custom,) = runs(doc, "UsesCustomOp", "draft_export")
    assert custom["failures"][0]["op"] == "tcxdemo.scale.default"
    # torch's report names the op, not a line: the line of the op's node in the ExportedProgram
    assert custom["failures"][0]["line"] == source_line(program, "# tcxdemo::scale has no fake kernel")


def test_guards_added_are_torchs_guard_added_events(deploy):
    """The eval guards of the (non-draft) exports are the `guard_added` events torch wrote to its own
    TORCH_TRACE log of the same run (draft_export writes its events to a log of its own)."""
    doc = deploy["doc"]
    ours = {
        (g["expr"], g["prefix"], g["line"])
        for e in doc["exports"]
        if e["api"] == "export"
        for g in e["guards_added"]
    }
    torch_guards = set()
    for name, md, _ in torch_trace_records(deploy["trace"]):
        if name == "guard_added":
            stack = md[name]["user_stack"]  # innermost last: the user's line
            torch_guards.add((md[name]["expr"], md[name]["prefix"], stack[-1]["line"] if stack else None))
    assert torch_guards and ours == torch_guards


def test_torch_2_13s_own_log_of_the_run_read_offline(deploy, tmp_path):
    """Offline, the TORCH_TRACE log torch wrote during the live run (tcx had torch's detailed trace
    on while each export ran, so it holds what TORCH_DTRACE logs) agrees with the live run on each
    call it holds: the eight before the first draft_export, which took torch's trace for itself and
    wrote each draft call's log to <tmp>/export_<user>, where the output says to look.
    tlparse 0.4.3 cannot read torch 2.13's `guard_added` (its `frame_locals` changed type) and lists
    no issue; it says so for each event, which this test checks too."""
    (log,) = sorted(deploy["trace"].glob("*.log"))
    proc = run_tcx("export", str(log), "--format", "json", env={**ENV, "TMPDIR": str(deploy["tmp"])})
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    live = deploy["doc"]["exports"]
    first_draft = [e["api"] for e in live].index("draft_export")
    assert len(doc["exports"]) == first_draft == 8
    for mine, theirs in zip(doc["exports"], live[:first_draft], strict=True):
        assert_log_agrees(mine, theirs)
    drafts = list((deploy["tmp"] / f"export_{getpass.getuser()}").glob("*.log"))
    assert len(drafts) == len(live) - first_draft  # torch's: one log per draft_export call
    assert f"({len(drafts)} log(s) there now)" in doc["notes"][0]
    records = [
        md["guard_added"] for name, md, _ in torch_trace_records(deploy["trace"]) if name == "guard_added"
    ]
    tl = subprocess.run(
        [_tlparse(), str(log), "--export", "-o", str(tmp_path / "tl"), "--no-browser"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert tl.stderr.count('Failed to parse metadata JSON: {"guard_added"') == len(records)
    assert tlparse_export_issues(log, tmp_path) == []


@pytest.mark.parametrize("kind", ["trace", "dtrace"])
def test_the_committed_logs_of_deploy_agree_with_its_live_run(deploy, kind):
    """fixtures/torch-trace/export/deploy: a plain TORCH_TRACE log (the calls before draft_export)
    and a TORCH_DTRACE directory (every call) of the same program, read offline."""
    proc = run_tcx("export", str(EXPORT_LOGS / "deploy" / kind), "--format", "json", env=ENV)
    assert proc.returncode == 0, proc.stderr
    logged, live = json.loads(proc.stdout)["exports"], deploy["doc"]["exports"]
    assert len(logged) == (len(live) if kind == "dtrace" else 8)
    for mine, theirs in zip(logged, live[: len(logged)], strict=True):
        assert_log_agrees(mine, theirs)


def test_check_gates_on_export_issues(deploy):
    saved = str(deploy["saved"])
    issues = deploy["doc"]["export_issue_count"]
    assert issues == 9  # 6 failures, 3 draft-export report entries
    ok = run_tcx("check", saved, "--max-export-issues", str(issues), env=ENV)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    over = run_tcx("check", saved, "--max-export-issues", "2", env=ENV)
    assert over.returncode == 1, over.stdout + over.stderr
    assert "torch.export issues" in over.stdout and "deploy.py" in over.stdout


def test_the_report_has_an_export_section(deploy):
    proc = run_tcx("report", str(deploy["saved"]), "--format", "json", env=ENV)
    assert proc.returncode == 0, proc.stderr[-2000:]
    section = json.loads(proc.stdout)["views"]["export"]
    assert section["schema"] == "tcx.export/1"
    assert section["export_issue_count"] == deploy["doc"]["export_issue_count"]


# --- a program that does not catch its failed export ---------------------------------------------


def test_an_uncaught_failure_is_shown_at_the_branch_and_the_program_says_what_it_says(tmp_path):
    program = EXPORT / "data_dependent_if.py"
    proc = run_tcx("export", str(program), "--show-output", "--width", "200", env=ENV)
    assert proc.returncode == 3, proc.stdout + proc.stderr  # the target failed (docs/exit-codes.md)
    text = proc.stdout
    line = source_line(program, "# data-dependent")
    assert f"at fixtures/programs/export/data_dependent_if.py:{line} in forward" in text
    assert "data-dependent branch" in text and "torch.cond(pred, true_fn, false_fn" in text
    assert text.count("Could not guard on data-dependent expression") == 1  # torch's message, once
    assert "the program stopped on the failure of export Gate" in text
    plain = plain_run(program)
    assert plain.returncode == 1 and "GuardOnDataDependentSymNode" in plain.stderr
    assert plain.stdout.splitlines() == ["exporting Gate"]
    assert "exporting Gate" in proc.stderr.splitlines()  # the program's output, passed through


def test_check_gates_a_deployment_script_as_it_runs():
    """`--max-export-issues` records the program's own exports (the `export` capture)."""
    program = EXPORT / "data_dependent_if.py"
    proc = run_tcx("check", str(program), "--max-export-issues", "0", env=ENV)
    assert proc.returncode == 3, proc.stdout + proc.stderr  # the program did not finish
    line = source_line(program, "# data-dependent")
    assert "FAIL  torch.export issues" in proc.stdout
    assert f"data_dependent_if.py:{line}  Gate: data-dependent" in proc.stdout.replace("\n", " ")


def test_tcx_exports_a_module_target_itself_with_draft_export(tmp_path):
    program = EXPORT / "modules.py"
    env = {**ENV, "TMPDIR": str(tmp_path)}  # draft_export writes its own log to <tmp>/export_<user>
    proc = run_tcx("export", f"{program}:Gate", "--draft", "--format", "json", env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    doc = json.loads(proc.stdout)
    (run,) = doc["exports"]
    assert (run["api"], run["name"], run["strict"], run["ok"]) == ("draft_export", "Gate", False, True)
    assert run["call_site"] is None  # tcx called it
    (issue,) = run["failures"]
    assert issue["torch_type"] == "DATA_DEPENDENT_ERROR"
    assert issue["line"] == source_line(program, "# a branch on a tensor's value")


# --- logs: the issues tlparse --export lists -----------------------------------------------------


def _tlparse() -> str:
    return tool("tlparse", "a dev dependency: pip install -e '.[dev]'")


def tlparse_export_issues(log: Path, tmp: Path) -> list[tuple[str, str, tuple[str, int] | None]]:
    """(failure type, expression or op, user line) of each row of tlparse's export report."""
    out = tmp / f"tl_{log.stem}"
    proc = subprocess.run(
        [_tlparse(), str(log), "--export", "-o", str(out), "--no-browser", "--overwrite"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    page = (out / "index.html").read_text()
    rows = []
    for row in re.findall(r"<tr>\s*<td>(.*?)</td>\s*<td>(.*?)</td>\s*<td>(.*?)</td>", page, re.S):
        kind, reason, info = row
        code = html.unescape(re.search(r"<code>(.*?)</code>", reason, re.S).group(1))
        code = code.removeprefix("torch.ops.")
        link = re.search(r"href='([^']+)'", info)
        where = None
        if link and (out / link.group(1)).exists():
            detail = html.unescape(re.sub(r"<[^>]+>", "\n", (out / link.group(1)).read_text()))
            stack = detail.split("User Stack", 1)[1].split("Framework Stack", 1)[0]
            frames = re.findall(r"(\S+\.py):(\d+) in \w+", stack)
            where = (frames[-1][0], int(frames[-1][1])) if frames else None
        rows.append((kind.strip(), code, where))
    return rows


# tlparse's names for the failure types of draft_export's report (torch/export/_draft_export.py)
TLPARSE_NAMES = {
    "Guard Evaluated": "GUARD_ADDED",
    "Data Dependent Error": "DATA_DEPENDENT_ERROR",
    "Missing Fake Kernel": "MISSING_FAKE_KERNEL",
    "Mismatched Fake Kernel": "MISMATCHED_FAKE_KERNEL",
}


@pytest.mark.parametrize("name", TLPARSE_EXPORT_LOGS)
def test_log_issues_are_tlparses(name, tmp_path):
    """Both are draft_export's own logs (older torch): the failures its report is made of, as
    `tlparse --export` lists them."""
    log = INPUTS / name
    proc = run_tcx("export", str(log), "--format", "json", env=ENV)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    ours = [
        (i["torch_type"], i["expr"] or i["op"], (i["file"], i["line"]) if i["line"] else None)
        for e in doc["exports"]
        for i in e["failures"]
    ]
    rows = tlparse_export_issues(log, tmp_path)
    theirs = [(TLPARSE_NAMES[kind], what, where) for kind, what, where in rows]
    assert ours == theirs and theirs
    assert all(e["ok"] is True and e["signature"]["outputs"] for e in doc["exports"])
    assert all(e["api"] == "draft_export" and e["logged_as"] == "draft_export log" for e in doc["exports"])


def test_the_draft_export_log_shows_the_evaluated_guard_at_its_line():
    proc = run_tcx("export", str(INPUTS / "export_guard_added.log"), "--width", "200", env=ENV)
    assert proc.returncode == 0, proc.stderr
    assert "specialized dynamic dim  GUARD_ADDED" in proc.stdout
    # the log cannot say whether draft_export's report listed it (only after a constraint violation)
    assert "its log does not say whether it did" in proc.stdout
    assert "Eq(s0, 3)" in proc.stdout
    assert "at /data/users/angelayi/pytorch/test/export/test_draft_export.py:297 in forward" in proc.stdout
    assert "assert a.shape[0] == 3" in proc.stdout


def tlparse_provenance(log: Path, tmp: Path) -> set[frozenset[str]]:
    """The post-grad nodes of each generated-code line tlparse maps (`--inductor-provenance`), by name."""
    out = tmp / "tl_prov"
    proc = subprocess.run(
        [_tlparse(), str(log), "-i", "-o", str(out), "--no-browser", "--overwrite"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    (page,) = out.glob("provenance_tracking_*.html")
    raw = re.search(
        r'<script id="lineMappings" type="application/json">(.*?)</script>', page.read_text(), re.S
    )
    mappings = json.loads(raw.group(1))
    (graph,) = out.glob("*/after_post_grad_graph_*.txt")
    lines = graph.read_text().splitlines()

    def node(number: int) -> str:
        return re.match(r"\s*(\w+):", lines[number - 1]).group(1)

    return {frozenset(node(n) for n in posts) for posts in mappings["cppCodeToPost"].values()}


@pytest.mark.parametrize("name", AOTI_LOGS)
def test_aoti_kernels_map_to_the_nodes_tlparse_maps(name, tmp_path):
    log = INPUTS / name
    proc = run_tcx("export", str(log), "--format", "json", env=ENV)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    (aoti,) = doc["aoti"]
    assert aoti["provenance"] is True
    # the program's torch.export.export call before the compile, found by its stack in this plain
    # TORCH_TRACE log; how it ended is not in such a log, and the output says so
    (export,) = doc["exports"]
    assert (export["api"], export["logged_as"], export["ok"]) == ("export", "TORCH_TRACE", None)
    assert any(lack.startswith("how the call ended") for lack in export["log_lacks"])
    ours = {frozenset(k["post_grad_nodes"]) for k in aoti["kernels"]}
    assert ours == tlparse_provenance(log, tmp_path)
    assert all(k["user_lines"] for k in aoti["kernels"] if k["kind"] == "kernel")


# --- AOTInductor on the CPU: one package, compiled with gcc -----------------------------------------


@pytest.mark.inductor
def test_an_aoti_package_shows_its_kernels_and_their_lines(tmp_path):
    program = EXPORT / "aoti_package.py"
    proc = run_tcx(
        "export",
        str(program),
        "--format",
        "json",
        "--show-output",
        env={**ENV, "TORCH_TRACE": str(tmp_path / "trace")},
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "matches eager: True" in proc.stderr  # the program's own check of its package
    doc = json.loads(proc.stdout)
    export, package = doc["exports"]
    assert (export["api"], export["ok"], package["api"], package["ok"]) == (
        "export",
        True,
        "aoti_compile_and_package",
        True,
    )
    assert package["package_path"].endswith("head.pt2")
    (aoti,) = doc["aoti"]
    assert aoti["export_index"] == package["index"]
    # the kernels are the functions torch's own log of the run has in AOTInductor's kernel code
    (code,) = [
        p
        for name, md, p in torch_trace_records(tmp_path / "trace")
        if name == "graph_dump" and md[name]["name"] == "inductor_aot_kernel_code"
    ]
    defined = set(re.findall(r"\bvoid\s+(cpp_fused_\w+)\(", code))
    assert {k["name"] for k in aoti["kernels"] if k["kind"] == "kernel"} == defined
    line = source_line(program, "return y * torch.sigmoid(y)")
    fused = next(k for k in aoti["kernels"] if "sigmoid" in k["name"])
    assert any(ul["line"] == line for ul in fused["user_lines"])
