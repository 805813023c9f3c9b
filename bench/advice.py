"""The advice sweep: `tcx fix` over the real-model corpus, each finding's first remedy verified, untested
or refuted.

For each program under fixtures/programs/models/ (and the logging fixture): `tcx fix PROG --backend eager
--format json --no-save --max-runs N` (eager: the advice is about Dynamo's breaks and guards). A finding is
one thing a remedy targets (a break site, a recompile); its first remedy is the first in tcx fix's order
that targets it. Verified: the re-run removed it and nothing got worse (torch's own counts of that run);
refuted: it ran and did not; untested: it was not run (--max-runs, a remedy that needs a code change, an
expected recompile listed only). Goal: refuted first remedies = 0. Prints a table; exits 1 when a first
remedy was refuted.

    python bench/advice.py [--max-runs N] [--out bench/advice.txt] [PROGRAM ...]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODELS = ROOT / "fixtures" / "programs" / "models"
CORPUS = [*sorted(MODELS.glob("*.py")), ROOT / "fixtures" / "programs" / "fix" / "warn_log.py"]


def fix_doc(program: Path, max_runs: int, timeout: float) -> dict[str, Any] | str:
    """tcx fix's JSON of one program, or why there is none."""
    argv = [sys.executable, "-m", "tcx", "fix", str(program), "--backend", "eager", "--no-save"]
    argv += ["--format", "json", "--max-runs", str(max_runs)]
    try:
        proc = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"timed out after {timeout:g} s"
    if proc.returncode != 0 or not proc.stdout.strip():
        return f"exit {proc.returncode}: {proc.stderr.strip().splitlines()[-1:] or ['no output']}"
    doc: dict[str, Any] = json.loads(proc.stdout)
    return doc


def first_remedies(doc: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(finding, its first remedy's change, verified | refuted | untested), in tcx fix's order."""
    out: dict[str, tuple[str, str, str]] = {}
    for remedy in doc.get("remedies") or []:
        if remedy["kind"] == "expected":
            continue  # an expected recompile: listed, never a problem to fix
        for finding in remedy.get("findings") or []:
            site = finding.get("site") or {}
            key = f"{finding['what']} at {Path(str(site.get('file'))).name}:{site.get('line')}"
            if site.get("arg") is not None:  # two sizes recompiling at one line are two findings
                key += f" ({site['arg']} dim {site.get('dim')})"
            if key in out:
                continue
            status = "verified" if remedy["verified"] else "refuted" if remedy["ran"] else "untested"
            out[key] = (key, remedy["change"].splitlines()[0], status)
    return list(out.values())


def sweep(programs: list[Path], max_runs: int = 3, timeout: float = 1800) -> dict[str, Any]:
    rows = []
    for program in programs:
        print(f"advice: tcx fix {program.relative_to(ROOT)} ...", file=sys.stderr, flush=True)
        doc = fix_doc(program, max_runs, timeout)
        name = str(program.relative_to(ROOT / "fixtures" / "programs"))
        if isinstance(doc, str):
            rows.append({"program": name, "error": doc, "findings": []})
            continue
        found = first_remedies(doc)
        rows.append(
            {
                "program": name,
                "findings": [dict(zip(("finding", "remedy", "status"), f, strict=True)) for f in found],
            }
        )
    statuses = [f["status"] for r in rows for f in r["findings"]]
    counts = {s: statuses.count(s) for s in ("verified", "untested", "refuted")}
    share = counts["verified"] / len(statuses) if statuses else None
    return {"programs": rows, "findings": len(statuses), **counts, "verified_share": share}


def table(result: dict[str, Any]) -> str:
    lines = ["advice sweep (tcx fix --backend eager over the corpus): each finding's first remedy"]
    for row in result["programs"]:
        if row.get("error"):
            lines.append(f"  {row['program']}: no result ({row['error']})")
            continue
        lines.append(f"  {row['program']}: {len(row['findings'])} finding(s)")
        for f in row["findings"]:
            lines.append(f"    {f['status']:<9} {f['finding']}  ->  {f['remedy']}")
    share = result["verified_share"]
    lines.append(
        f"findings {result['findings']}  verified {result['verified']}  untested {result['untested']}  "
        f"refuted {result['refuted']} (goal 0)  verified share "
        + (f"{share:.0%}" if share is not None else "-")
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("programs", nargs="*", type=Path, help="programs (default: the corpus)")
    parser.add_argument("--max-runs", type=int, default=3, help="tcx fix's --max-runs per program")
    parser.add_argument("--out", type=Path, default=None, help="also write the table here")
    args = parser.parse_args(argv)
    result = sweep([p.resolve() for p in args.programs] or CORPUS, args.max_runs)
    text = table(result)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 1 if result["refuted"] else 0


if __name__ == "__main__":
    sys.exit(main())
