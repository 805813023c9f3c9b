"""`tcx check` output: text, json, SARIF 2.1.0 and GitHub workflow-command annotations."""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any
from urllib.parse import quote

from rich.console import Console
from rich.text import Text

from tcx import __version__
from tcx.core.analysis.empty_run import compile_calls
from tcx.core.views.check import Cause, CheckResult, Verdict
from tcx.core.views.explain import BreakSite
from tcx.core.views.explain import to_json as explain_json
from tcx.renderers.children import render_child_processes
from tcx.renderers.code_block import Wrapped
from tcx.renderers.failure import render_failure
from tcx.renderers.header import location
from tcx.renderers.safe import clean, json_text

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def sarif_text(result: CheckResult) -> str:
    """The SARIF document as written (renderers/formats.py writes every format)."""
    return json_text(sarif(result)) + "\n"


def check_json(result: CheckResult) -> dict[str, Any]:
    doc = {**explain_json(result.explanation), **result.warm}
    doc["schema"] = "tcx.check/1"
    doc["passed"] = result.passed
    doc["baseline"] = (
        {"file": result.baseline, "worse": result.worse_than_baseline} if result.baseline else None
    )
    doc["budgets"] = [
        {
            "option": v.option,
            "limit": v.limit,
            "actual": v.actual,
            "in_child_processes": v.in_children,
            "exceeded": v.exceeded,
            "causes": [vars(c) for c in v.causes] if v.exceeded else [],
        }
        for v in result.verdicts
    ]
    doc["unreadable"] = result.unreadable
    doc["inconsistent"] = result.inconsistent
    doc["not_as_program"] = result.not_as_program
    doc["compiled_nothing"] = (
        {"text": result.empty, "allowed": result.empty_allowed} if result.empty else None
    )
    return doc


MAX_CAUSES = 20  # per failed budget in text; JSON, SARIF and GitHub annotations list them all


def render_text(result: CheckResult, console: Console) -> None:
    for v in result.verdicts:
        mark, style = ("FAIL", "bad") if v.exceeded else ("ok", "good")
        t = Text(f"{mark:>4}  ", style=style)
        t.append(f"{v.label}: {v.actual} (budget {v.option} {v.limit})")
        if v.in_children:
            t.append(f", {v.in_children} of them in child processes", style="muted")
        console.print(t)
        if v.exceeded:
            render_causes(v.causes, console)
    if result.not_as_program:
        console.print(
            Text(
                "FAIL  not the program's own run: "
                + clean("; ".join(result.not_as_program))
                + ". Its counts "
                "may differ from the program's (Inductor adds guards and restarts that eager does not).",
                style="bad",
            )
        )
        console.print(
            Text(
                "      Check the program as it runs (leave the override out), or accept the override "
                "for this check by passing it again (e.g. --backend eager).",
                style="muted",
            )
        )
    if result.baseline:
        if result.worse_than_baseline:
            console.print(Text(f"FAIL  worse than the baseline {clean(result.baseline)}:", style="bad"))
            for item in result.worse_than_baseline:
                console.print(Text(f"      {clean(item)}"))
        else:
            console.print(Text(f"  ok  no worse than the baseline {clean(result.baseline)}", style="good"))
    if result.empty:
        mark, style = ("  ok", "warn") if result.empty_allowed else ("FAIL", "bad")
        allowed = " (allowed by --allow-empty)" if result.empty_allowed else ""
        console.print(
            Wrapped(Text(f"{mark}  {clean(result.empty)}{allowed}", style=style), prose=True, hang=6)
        )
    render_child_processes(result.explanation.model, console)
    reasons = [f"{v.label} {v.actual} {v.relation} {v.limit}" for v in result.failed]
    reasons += ["worse than the baseline"] if result.worse_than_baseline else []
    reasons += ["not the program's own run"] if result.not_as_program else []
    reasons += (
        ["nothing compiled (--allow-empty passes it)"] if result.empty and not result.empty_allowed else []
    )
    if result.failure:
        render_failure(result.failure, console)
        reasons.insert(0, "the program did not finish, so its counts are partial")
    if result.not_observed:
        reasons.append(f"{len(result.not_observed)} child process(es) not observed")
    if result.unreadable:
        console.print(
            Text(f"FAIL  {len(result.unreadable)} line(s) of the input could not be read:", style="bad")
        )
        for problem in result.unreadable[:5]:
            console.print(Wrapped(Text(f"      {clean(problem)}"), prose=True, hang=8))
        if len(result.unreadable) > 5:
            more = len(result.unreadable) - 5
            console.print(Text(f"      and {more} more (--format json lists them all)", style="muted"))
        reasons.append(f"{len(result.unreadable)} unreadable line(s): what they held is unknown")
    if result.inconsistent:
        console.print(Text("FAIL  the input disagrees with itself (records missing or cut):", style="bad"))
        for problem in result.inconsistent:
            console.print(Text(f"      {clean(problem)}"))
        reasons.append("the input disagrees with itself: what is missing is unknown")
    verdict = "check failed: " + ", ".join(reasons) if reasons else "check passed"
    console.print(Text(verdict, style="good" if result.passed else "bad"))


def render_causes(causes: list[Cause], console: Console) -> None:
    for cause in causes[:MAX_CAUSES]:
        t = Text("      ")
        if cause.file:
            t.append(location(cause.file, cause.line), style="loc")
            t.append("  ")
        t.append(clean(cause.text))
        console.print(Wrapped(t, prose=True, hang=8))
    if len(causes) > MAX_CAUSES:
        console.print(
            Text(f"      and {len(causes) - MAX_CAUSES} more (--format json lists them all)", style="muted")
        )


RULE_SLUG = 80  # a rule id's slug is cut at the last whole word within this many characters


def rule_id(gb_type: str) -> str:
    """Stable SARIF rule id from the break type: tcx/graph-break/<slug>, whole words only."""
    slug = re.sub(r"[^a-z0-9]+", "-", gb_type.lower()).strip("-")
    if len(slug) > RULE_SLUG:
        cut = slug[: RULE_SLUG + 1]
        slug = cut[: cut.rindex("-")] if "-" in cut else slug[:RULE_SLUG]
    return f"tcx/graph-break/{slug or 'graph-break'}"


def site_location(site: BreakSite) -> tuple[str | None, int | None, str]:
    """Where CI places a break: the user's line that led into library code (the file in the repository),
    with the library frame named in the message; else the break's own line."""
    entry = site.entry_frame
    if site.in_library and entry is not None and entry.file:
        inner = site.user_stack[-1]
        lib = re.split(r"[/\\](?:site|dist)-packages[/\\]", inner.file)[-1]
        return (
            entry.file,
            entry.line,
            f" It breaks in {lib}:{inner.line} ({inner.name}), reached from this line.",
        )
    return site.file, site.line, ""


def _uri(path: str | None) -> str:
    if not path:
        return "unknown"
    try:
        rel = os.path.relpath(path)
    except ValueError:
        rel = path
    return (path if rel.startswith("..") else rel).replace(os.sep, "/")


def _message(site: BreakSite) -> str:
    parts = [
        f"Graph break: {site.gb_type}" + (f" ({site.gb_id})" if site.gb_id else ""),
        f"occurs {len(site.occurrences)} time(s).",
    ]
    if site.explanation:
        parts.append(site.explanation.splitlines()[0])
    if site.suggestion:
        parts.append(f"Fix: {site.suggestion}")
    return " ".join(parts)


def sarif(result: CheckResult) -> dict[str, Any]:
    sites = result.explanation.sites
    rules: dict[str, dict[str, Any]] = {}
    results = []
    for site in sites:
        rid = rule_id(site.gb_type)
        rules.setdefault(
            rid,
            {
                "id": rid,
                "name": site.gb_type,
                "shortDescription": {"text": f"torch.compile graph break: {site.gb_type}"},
                "helpUri": f"https://meta-pytorch.github.io/compile-graph-break-site/gb/{site.gb_id.lower()}.html"
                if site.gb_id
                else "https://docs.pytorch.org/docs/stable/torch.compiler_troubleshooting.html",
                "properties": {"gb_id": site.gb_id},
            },
        )
        fingerprint = hashlib.sha256(f"{site.gb_type}|{_uri(site.file)}|{site.line}".encode()).hexdigest()[
            :32
        ]
        file, line, via = site_location(site)
        results.append(
            {
                "ruleId": rid,
                "level": "warning" if result.passed else "error",
                "message": {"text": _message(site) + via},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": quote(_uri(file), safe="/:")},
                            "region": {"startLine": line or 1},
                        }
                    }
                ],
                "partialFingerprints": {"tcxGraphBreak/v1": fingerprint},
                "properties": {"occurrences": len(site.occurrences), "gb_id": site.gb_id},
            }
        )
    for v in result.failed:
        if v.option in ("--max-graph-breaks", "--max-unique-graph-breaks"):
            continue  # each break site is a result above
        rid = v.budget.rule_id
        rules.setdefault(
            rid, {"id": rid, "name": v.label, "shortDescription": {"text": f"tcx check: {v.label}"}}
        )
        for cause in v.causes:
            location: dict[str, Any] = {
                "physicalLocation": {"artifactLocation": {"uri": quote(_uri(cause.file), safe="/:")}}
            }
            if cause.file:
                location["physicalLocation"]["region"] = {"startLine": cause.line or 1}
            results.append(
                {
                    "ruleId": rid,
                    "level": "error",
                    "message": {
                        "text": f"{v.label}: {v.actual} {_verb(v)} {v.option} {v.limit}: {cause.text}"
                    },
                    "locations": [location] if cause.file else [],
                }
            )
    if result.empty and not result.empty_allowed:
        rid = "tcx/nothing-compiled"
        rules.setdefault(rid, {"id": rid, "name": "nothing compiled", "shortDescription": {"text": rid}})
        calls = compile_calls(result.explanation.model)
        results.append(
            {
                "ruleId": rid,
                "level": "error",
                "message": {"text": result.empty},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": quote(_uri(c.file), safe="/:")},
                            "region": {"startLine": c.line or 1},
                        }
                    }
                    for c in calls[:1]
                    if c.file
                ],
            }
        )
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "tcx",
                        "version": __version__,
                        "informationUri": "https://github.com/",
                        "rules": list(rules.values()),
                    }
                },
                "results": results,
                "properties": {
                    "budgets": [
                        {"option": v.option, "limit": v.limit, "actual": v.actual} for v in result.verdicts
                    ]
                },
            }
        ],
    }


def _verb(v: Verdict) -> str:
    return "is under" if v.floor else "exceeds"


def _gh_escape(text: str, prop: bool = False) -> str:
    out = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    if prop:
        out = out.replace(":", "%3A").replace(",", "%2C")
    return out


def github(result: CheckResult) -> str:
    lines = []
    level = "warning" if result.passed else "error"
    for site in result.explanation.sites:
        title = clean(f"graph break: {site.gb_type}")
        file, line, via = site_location(site)
        lines.append(
            f"::{level} file={_gh_escape(clean(_uri(file)), True)},line={line or 1},"
            f"title={_gh_escape(title, True)}::{_gh_escape(clean(_message(site) + via))}"
        )
    for v in result.failed:
        lines.append(
            f"::error title=tcx check::{_gh_escape(f'{v.label}: {v.actual} {_verb(v)} {v.option} {v.limit}')}"
        )
        if v.option in ("--max-graph-breaks", "--max-unique-graph-breaks"):
            continue  # each break site is annotated above
        for cause in v.causes:
            where = (
                f"file={_gh_escape(clean(_uri(cause.file)), True)},line={cause.line or 1},"
                if cause.file
                else ""
            )
            title = _gh_escape(f"tcx check: {v.label}", True)
            lines.append(f"::error {where}title={title}::{_gh_escape(clean(cause.text))}")
    for text in result.not_as_program:
        lines.append(f"::error title=tcx check (not the program's run)::{_gh_escape(clean(text))}")
    for item in result.worse_than_baseline:
        lines.append(f"::error title=tcx check (baseline)::{_gh_escape(clean(item))}")
    if result.empty and not result.empty_allowed:
        first = next((c for c in compile_calls(result.explanation.model) if c.file), None)
        where = f"file={_gh_escape(clean(_uri(first.file)), True)},line={first.line or 1}," if first else ""
        lines.append(f"::error {where}title=tcx check (nothing compiled)::{_gh_escape(clean(result.empty))}")
    for text in result.inconsistent:
        lines.append(f"::error title=tcx check (input incomplete)::{_gh_escape(clean(text))}")
    if result.passed:
        lines.append("::notice title=tcx check::all budgets met")
    return "\n".join(lines) + "\n"
