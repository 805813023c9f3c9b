"""`tcx fix`: candidate remedies from a run's findings, each re-run and verified.

candidates.py (from findings to remedies), verify.py (the runs and the verdicts), rewrites.py
(mechanical code rewrites on a copy), outputs.py (do two runs return the same outputs?).

May import (tests/test_structure.py holds it): core/views and everything below them (core/cost,
core/numerics, core/analysis, core/model, core/ingest, core/torchtext, core's basics); not core/run.
"""
