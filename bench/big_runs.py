"""`make bench` rows for real-size runs (issue 13): every view on a >= 45 MB TORCH_TRACE log, the
HTML report, a 1 GB log and a directory of 64 rank logs, each against tlparse on the same input.

Each command is a real subprocess, timed from outside: wall clock, CPU time and peak RSS of its
process tree (`os.wait4`), and how long until its first byte of output (what a user waits for).
The tcx side and tlparse run interleaved, round by round, so machine load hits both alike.

Inputs are made once and kept under bench/results/ (git-ignored):
- large_trace/*.log  bench/make_large_log.py under TORCH_TRACE (Inductor compiles; minutes);
- huge.log           that log repeated with distinct frame ids to HUGE_MB (no torch needed);
- ranks64/           bench/make_ranks.py: 64 real rank logs relabelled, one diverging.
"""

from __future__ import annotations

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(__file__).resolve().parent / "results"
HUGE_LOG = RESULTS / "huge.log"
RANKS_DIR = RESULTS / "ranks64"
HUGE_MB = 1024
FRAME_STRIDE = 100_000  # frame ids of copy k start at k * FRAME_STRIDE
TLPARSE_HUGE_TIMEOUT_S = 900

# Goals (issue 13).
GOAL_VIEW_RATIO = 0.25  # every view, at most a quarter of tlparse's time on the same log (issue 24)
GOAL_FIRST_OUTPUT_S = 1.0
GOAL_HTML_RATIO = 1.0
GOAL_HTML_RSS_MB = 400
GOAL_HUGE_RATIO = 0.3
GOAL_HUGE_RSS_MB = 300
GOAL_RANKS_RATIO = 0.5
GOAL_FIRST_SCREEN_S = 3.0

# (label, tcx arguments after the view; LOG stands for the log). Default text output goes to a
# pipe: a per-compile view prints its index on a big run; `--all` rows print everything.
VIEW_ROWS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("explain", ("explain", "LOG")),
    ("check", ("check", "LOG", "--max-graph-breaks", "100000")),
    ("recompiles", ("recompiles", "LOG")),
    ("guards", ("guards", "LOG")),
    ("guards --all", ("guards", "LOG", "--all")),
    ("trace", ("trace", "LOG")),
    ("bytecode", ("bytecode", "LOG")),
    ("graphs", ("graphs", "LOG")),
    ("graphs --all", ("graphs", "LOG", "--all")),
    ("fusion", ("fusion", "LOG")),
    ("codegen", ("codegen", "LOG")),
    ("codegen --all", ("codegen", "LOG", "--all")),
    ("cache", ("cache", "LOG")),
    ("diff LOG LOG", ("diff", "LOG", "LOG")),
    ("show --events", ("show", "LOG", "--events")),
    ("explain --format json", ("explain", "LOG", "--format", "json")),
)


@dataclass
class Run:
    wall_s: float
    cpu_s: float
    peak_rss_mb: float
    first_output_s: float | None
    output_bytes: int
    returncode: int


@dataclass
class Timed:
    label: str
    argv: list[str]
    runs: list[Run] = field(default_factory=list)

    def median(self, key: str) -> float:
        return statistics.median(getattr(r, key) or 0.0 for r in self.runs)

    def summary(self) -> dict[str, Any]:
        return {
            "label": self.label,
            "argv": self.argv,
            "median_wall_s": round(self.median("wall_s"), 3),
            "median_cpu_s": round(self.median("cpu_s"), 3),
            "peak_rss_mb": round(max(r.peak_rss_mb for r in self.runs), 1),
            "median_first_output_s": round(self.median("first_output_s"), 3),
            "output_bytes": self.runs[-1].output_bytes,
            "samples": [vars(r) for r in self.runs],
        }


def run(argv: Sequence[str], env: dict[str, str], timeout: float | None = None) -> Run:
    """Run `argv` once: wall time, first byte of stdout, CPU and peak RSS of its process tree."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
    )
    assert proc.stdout is not None
    killer = threading.Timer(timeout, proc.kill) if timeout else None
    if killer:
        killer.start()
    first, size = None, 0
    while True:
        chunk = proc.stdout.read1(1 << 16)
        if not chunk:
            break
        if first is None:
            first = time.perf_counter() - start
        size += len(chunk)
    _, status, usage = os.wait4(proc.pid, 0)
    if killer:
        killer.cancel()
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return Run(
        wall_s=round(wall, 4),
        cpu_s=round(usage.ru_utime + usage.ru_stime, 4),
        peak_rss_mb=round(usage.ru_maxrss / 1024, 1),
        first_output_s=None if first is None else round(first, 4),
        output_bytes=size,
        returncode=proc.returncode,
    )


def measure(commands: Sequence[Timed], runs: int, env: dict[str, str], log: Callable[[str], None]) -> None:
    for i in range(runs):
        order = commands if i % 2 == 0 else list(reversed(commands))
        for cmd in order:
            r = run(cmd.argv, env)
            if r.returncode not in (0, 1, 3):  # 1: a check budget, 3: the logged job failed
                raise RuntimeError(f"{cmd.label}: exit code {r.returncode} ({' '.join(cmd.argv)})")
            cmd.runs.append(r)
            log(
                f"  run {i + 1}/{runs}  {cmd.label:<32} {r.wall_s:7.2f} s  first output "
                f"{r.first_output_s if r.first_output_s is not None else '-'} s  {r.peak_rss_mb:6.0f} MB"
            )


def tlparse_argv(tlparse: Path, target: Path, out: Path, *extra: str) -> list[str]:
    return [str(tlparse), str(target), "-o", str(out), "--overwrite", "--no-browser", *extra]


def views_vs_tlparse(
    tcx: list[str],
    tlparse: Path,
    log_file: Path,
    runs: int,
    env: dict[str, str],
    workdir: Path,
    log: Callable[[str], None],
    before: Before | None = None,
) -> dict[str, Any]:
    """Every view (default text to a pipe; --all rows too) against `tlparse LOG` on the same log;
    with `before`, the same rows of an earlier tcx, interleaved with these."""
    ref = Timed("tlparse LOG", tlparse_argv(tlparse, log_file, workdir / "tlparse_out"))

    def rows_of(argv: list[str], tag: str) -> list[Timed]:
        return [
            Timed(f"tcx{tag} {label}", [*argv, *(str(log_file) if a == "LOG" else a for a in args)])
            for label, args in VIEW_ROWS
        ]

    views = rows_of(tcx, "")
    earlier = rows_of(before.argv, f"@{before.rev}") if before else []
    order = [ref]
    for i, v in enumerate(views):
        order += [v, earlier[i]] if earlier else [v]
    measure(order, runs, env, log)
    base = ref.median("wall_s")
    rows = []
    for i, v in enumerate(views):
        ratio = v.median("wall_s") / base
        first = v.median("first_output_s")
        rows.append(
            {
                **v.summary(),
                "ratio_wall": round(ratio, 3),
                "ok": ratio <= GOAL_VIEW_RATIO and first <= GOAL_FIRST_OUTPUT_S,
                "before": _before(earlier[i], base) if earlier else None,
            }
        )
    return {
        "name": "views vs tlparse",
        "log": str(log_file),
        "log_mb": round(log_file.stat().st_size / 2**20, 1),
        "reference": ref.summary(),
        "rows": rows,
        "goal_ratio_max": GOAL_VIEW_RATIO,
        "goal_first_output_s_max": GOAL_FIRST_OUTPUT_S,
        "before_rev": before.rev if before else None,
    }


@dataclass(frozen=True)
class Before:
    """An earlier tcx (`bench.py --against REV`): its commit and how to run it."""

    rev: str
    argv: list[str]


def _before(timed: Timed, reference_s: float) -> dict[str, Any]:
    return {
        "median_wall_s": round(timed.median("wall_s"), 3),
        "peak_rss_mb": round(max(r.peak_rss_mb for r in timed.runs), 1),
        "ratio_wall": round(timed.median("wall_s") / reference_s, 3),
    }


def html_report(
    tcx: list[str],
    tlparse: Path,
    log_file: Path,
    runs: int,
    env: dict[str, str],
    workdir: Path,
    log: Callable[[str], None],
    before: Before | None = None,
) -> dict[str, Any]:
    page = workdir / "report.html"
    html = Timed(
        "tcx report --format html", [*tcx, "report", str(log_file), "--format", "html", "-o", str(page)]
    )
    ref = Timed("tlparse LOG", tlparse_argv(tlparse, log_file, workdir / "tlparse_html"))
    earlier = before and Timed(
        f"tcx@{before.rev} report --format html",
        [*before.argv, "report", str(log_file), "--format", "html", "-o", str(workdir / "before.html")],
    )
    measure([html, ref, *([earlier] if earlier else [])], runs, env, log)
    ratio = html.median("wall_s") / ref.median("wall_s")
    screen = first_screen(page, workdir, env)
    rss = html.summary()["peak_rss_mb"]
    return {
        "name": "HTML report",
        "tcx": html.summary(),
        "reference": ref.summary(),
        "ratio_wall": round(ratio, 3),
        "html_mb": round(page.stat().st_size / 2**20, 2),
        "tlparse_out_mb": round(folder_bytes(workdir / "tlparse_html") / 2**20, 2),
        "first_screen_s": screen,
        "before": _before(earlier, ref.median("wall_s")) if earlier else None,
        "ok": ratio <= GOAL_HTML_RATIO
        and rss <= GOAL_HTML_RSS_MB
        and (screen is None or screen <= GOAL_FIRST_SCREEN_S),
    }


def first_screen(page: Path, workdir: Path, env: dict[str, str]) -> float | None:
    """Wall time of headless Chromium loading the page and painting one 1280x900 screenshot
    (browser start-up included: an upper bound on the first screen). None without Chromium."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    if browser is None:
        return None
    flags = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--user-data-dir={workdir / 'chromium'}",
        "--window-size=1280,900",
        f"--screenshot={workdir / 'first.png'}",
    ]
    start = time.perf_counter()
    subprocess.run([browser, *flags, page.as_uri()], env=env, capture_output=True, timeout=300, check=False)
    return round(time.perf_counter() - start, 3)


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()) if folder.is_dir() else 0


_FRAME_ID = re.compile(rb'"frame_id": (\d+)')
_RECORD = re.compile(rb"^[VIWEF]\d{4} ")


def make_huge_log(source: Path, target: Path = HUGE_LOG, megabytes: int = HUGE_MB) -> Path:
    """`source` repeated until `megabytes`, copy k with every frame id + k * FRAME_STRIDE: one job
    compiling ever new frames (each copy's payloads and checksums are the real ones)."""
    if target.exists() and target.stat().st_size >= megabytes * 2**20:
        return target
    lines = source.read_bytes().splitlines(keepends=True)
    records = [i for i, line in enumerate(lines) if _RECORD.match(line) and b'"frame_id"' in line]
    tmp = target.with_suffix(".part")
    with tmp.open("wb") as out:
        k = 0
        while out.tell() < megabytes * 2**20:
            shift = k * FRAME_STRIDE
            for i in records:
                lines[i] = _FRAME_ID.sub(
                    lambda m, s=shift: b'"frame_id": %d' % (int(m.group(1)) % FRAME_STRIDE + s), lines[i]
                )
            out.writelines(lines)
            k += 1
    tmp.replace(target)
    return target


def huge_log(
    tcx: list[str],
    tlparse: Path,
    large: Path,
    env: dict[str, str],
    workdir: Path,
    per_mb_ref: float | None,
    log: Callable[[str], None],
    before: Before | None = None,
) -> dict[str, Any]:
    """`tcx explain` of the 1 GB log (time, peak RSS) against tlparse on the same file, or, when
    tlparse cannot finish it, against tlparse's time per MB on the large log; and the HTML report
    of that log (peak RSS), with `before` for an earlier tcx too."""
    log(f"  writing the {HUGE_MB} MB log (once) ...")
    huge = make_huge_log(large)
    mb = huge.stat().st_size / 2**20
    explain = Timed("tcx explain HUGE", [*tcx, "explain", str(huge)])
    html_args = ["report", str(huge), "--format", "html", "-o", str(workdir / "huge.html")]
    html = Timed("tcx report --format html HUGE", [*tcx, *html_args])
    earlier = (
        [
            Timed(f"tcx@{before.rev} explain HUGE", [*before.argv, "explain", str(huge)]),
            Timed(f"tcx@{before.rev} report --format html HUGE", [*before.argv, *html_args]),
        ]
        if before
        else []
    )
    measure([explain, html, *earlier], 1, env, log)
    ref = run(tlparse_argv(tlparse, huge, workdir / "tlparse_huge"), env, timeout=TLPARSE_HUGE_TIMEOUT_S)
    log(f"  tlparse HUGE: {ref.wall_s:.1f} s, exit {ref.returncode}, {ref.peak_rss_mb:.0f} MB")
    finished = ref.returncode == 0
    ref_s = ref.wall_s if finished else (per_mb_ref or 0.0) * mb
    ratio = explain.median("wall_s") / ref_s if ref_s else None
    rss = explain.summary()["peak_rss_mb"]
    return {
        "name": "1 GB log",
        "log_mb": round(mb, 1),
        "tcx": explain.summary(),
        "reference": vars(ref),
        "reference_kind": "tlparse on the same file"
        if finished
        else "tlparse's time per MB on the large log",
        "reference_s": round(ref_s, 3),
        "ratio_wall": None if ratio is None else round(ratio, 3),
        "ok": ratio is not None and ratio <= GOAL_HUGE_RATIO and rss <= GOAL_HUGE_RSS_MB,
        "before": _before(earlier[0], ref_s) if earlier and ref_s else None,
        "html": {
            **html.summary(),
            "ok": html.summary()["peak_rss_mb"] <= GOAL_HTML_RSS_MB,
            "before": _before(earlier[1], ref_s) if earlier and ref_s else None,
        },
    }


def ranks(
    tcx: list[str], tlparse: Path, runs: int, env: dict[str, str], workdir: Path, log: Callable[[str], None]
) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    try:
        import make_ranks
    finally:
        sys.path.pop(0)
    if not RANKS_DIR.is_dir() or len(list(RANKS_DIR.glob("*.log"))) != 64:
        shutil.rmtree(RANKS_DIR, ignore_errors=True)
        make_ranks.write_ranks(RANKS_DIR, 64)
    explain = Timed("tcx explain RANKS", [*tcx, "explain", str(RANKS_DIR)])
    ref = Timed(
        "tlparse --all-ranks-html",
        tlparse_argv(tlparse, RANKS_DIR, workdir / "tlp_ranks", "--all-ranks-html"),
    )
    measure([explain, ref], runs, env, log)
    ratio = explain.median("wall_s") / ref.median("wall_s")
    return {
        "name": "64 ranks",
        "dir_mb": round(folder_bytes(RANKS_DIR) / 2**20, 1),
        "tcx": explain.summary(),
        "reference": ref.summary(),
        "ratio_wall": round(ratio, 3),
        "cpus": os.cpu_count(),
        "ok": ratio <= GOAL_RANKS_RATIO,
    }


def big_runs(
    tcx: list[str],
    large: Path,
    runs: int,
    env: dict[str, str],
    log: Callable[[str], None],
    before: Before | None = None,
) -> dict[str, Any] | None:
    tlparse = Path(sys.executable).parent / "tlparse"
    if not tlparse.exists():
        log("  tlparse is not installed: skipping the big-run rows")
        return None
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="tcx-bench-big-") as tmp:
        work = Path(tmp)
        log("every view vs tlparse on the large log ...")
        out["views"] = views_vs_tlparse(tcx, tlparse, large, runs, env, work, log, before)
        log("HTML report ...")
        out["html"] = html_report(tcx, tlparse, large, runs, env, work, log, before)
        log("64 ranks ...")
        out["ranks"] = ranks(tcx, tlparse, runs, env, work, log)
        per_mb = out["views"]["reference"]["median_wall_s"] / out["views"]["log_mb"]
        log(f"{HUGE_MB} MB log ...")
        out["huge"] = huge_log(tcx, tlparse, large, env, work, per_mb, log, before)
    return out


def table(big: dict[str, Any]) -> str:
    views = big["views"]
    rev = views.get("before_rev")
    head = ("measurement", "tcx", "first output", "peak RSS", "reference", "ratio", "goal", "status")
    head += (f"before ({rev}): ratio, RSS",) if rev else ()
    rows: list[tuple[str, ...]] = [head]

    def earlier(row: dict[str, Any]) -> tuple[str, ...]:
        b = row.get("before")
        return (f"{b['ratio_wall']:.2f}, {b['peak_rss_mb']:.0f} MB" if b else "-",) if rev else ()

    ref_s = views["reference"]["median_wall_s"]
    for r in views["rows"]:
        rows.append(
            (
                f"{r['label']} ({views['log_mb']:.0f} MB log)",
                f"{r['median_wall_s']:.2f} s",
                f"{r['median_first_output_s']:.2f} s",
                f"{r['peak_rss_mb']:.0f} MB",
                f"{ref_s:.2f} s (tlparse)",
                f"{r['ratio_wall']:.2f}",
                f"<= {GOAL_VIEW_RATIO}, first <= {GOAL_FIRST_OUTPUT_S:.0f} s",
                status(r["ok"]),
                *earlier(r),
            )
        )
    h = big["html"]
    screen = f"; first screen {h['first_screen_s']:.1f} s" if h.get("first_screen_s") is not None else ""
    rows.append(
        (
            f"report --format html ({h['html_mb']:.1f} MB file{screen})",
            f"{h['tcx']['median_wall_s']:.2f} s",
            "",
            f"{h['tcx']['peak_rss_mb']:.0f} MB",
            f"{h['reference']['median_wall_s']:.2f} s (tlparse)",
            f"{h['ratio_wall']:.2f}",
            f"<= {GOAL_HTML_RATIO}, <= {GOAL_HTML_RSS_MB} MB",
            status(h["ok"]),
            *earlier(h),
        )
    )
    g = big["huge"]
    rows.append(
        (
            f"explain, {g['log_mb'] / 1024:.2f} GB log",
            f"{g['tcx']['median_wall_s']:.2f} s",
            f"{g['tcx']['median_first_output_s']:.2f} s",
            f"{g['tcx']['peak_rss_mb']:.0f} MB",
            f"{g['reference_s']:.2f} s ({g['reference_kind']})",
            "-" if g["ratio_wall"] is None else f"{g['ratio_wall']:.2f}",
            f"<= {GOAL_HUGE_RATIO}, <= {GOAL_HUGE_RSS_MB} MB",
            status(g["ok"]),
            *earlier(g),
        )
    )
    gh = g["html"]
    rows.append(
        (
            f"report --format html, {g['log_mb'] / 1024:.2f} GB log",
            f"{gh['median_wall_s']:.2f} s",
            "",
            f"{gh['peak_rss_mb']:.0f} MB",
            "",
            "",
            f"<= {GOAL_HTML_RSS_MB} MB",
            status(gh["ok"]),
            *earlier(gh),
        )
    )
    k = big["ranks"]
    rows.append(
        (
            f"explain, 64 ranks ({k['dir_mb']:.0f} MB, {k['cpus']} cpus)",
            f"{k['tcx']['median_wall_s']:.2f} s",
            f"{k['tcx']['median_first_output_s']:.2f} s",
            f"{k['tcx']['peak_rss_mb']:.0f} MB",
            f"{k['reference']['median_wall_s']:.2f} s (tlparse --all-ranks-html)",
            f"{k['ratio_wall']:.2f}",
            f"<= {GOAL_RANKS_RATIO}",
            status(k["ok"]),
            *(("-",) if rev else ()),
        )
    )
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def status(ok: bool) -> str:
    return "ok" if ok else "MISSED"
