"""Write a directory of N rank logs (default 64) from real TORCH_TRACE logs: ranks relabelled, one diverging.

Every rank is a copy of one real rank's log (fixtures/torch-trace/tlparse-tests/inputs/
multi_rank_logs, rank 1: a program compiling one frame fifteen times), named as torch names
per-rank logs (`dedicated_log_torch_trace_rank_N.log`) and with any `"rank": K` in its records
set to N. One rank (N // 2 + 5 by default) gets the log of another real rank of that job
(rank 3), which compiled fewer frames: the first divergence tcx must find.

Usage: python bench/make_ranks.py OUT_DIR [--ranks 64] [--diverging R]
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE = ROOT / "fixtures" / "torch-trace" / "tlparse-tests" / "inputs" / "multi_rank_logs"
BASE = SOURCE / "dedicated_log_torch_trace_rank_1.log"
DIVERGING = SOURCE / "dedicated_log_torch_trace_rank_3.log"
_RANK_FIELD = re.compile(rb'"rank": \d+')
_RECORD = re.compile(rb"^[VIWEF]\d{4} ", re.M)


def relabel(log: bytes, rank: int) -> bytes:
    """`"rank": K` -> `"rank": rank` in the metadata lines only (payload lines start with a tab)."""
    out = []
    for line in log.splitlines(keepends=True):
        out.append(_RANK_FIELD.sub(b'"rank": %d' % rank, line) if _RECORD.match(line) else line)
    return b"".join(out)


def write_ranks(out: Path, ranks: int = 64, diverging: int | None = None) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    diverging = ranks // 2 + 5 if diverging is None else diverging
    base, odd = BASE.read_bytes(), DIVERGING.read_bytes()
    for rank in range(ranks):
        text = relabel(odd if rank == diverging else base, rank)
        (out / f"dedicated_log_torch_trace_rank_{rank}.log").write_bytes(text)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--ranks", type=int, default=64)
    parser.add_argument("--diverging", type=int, default=None)
    args = parser.parse_args()
    write_ranks(args.out, args.ranks, args.diverging)


if __name__ == "__main__":
    main()
