"""`tcx numerics`: does the compiled program compute what eager computes, and if not, where it stops.

judge.py (one value against eager and float64), compare.py (the runs' kept values, record by record),
report.py (the typed report, torch-free), pipeline.py (the runs: eager with its float64 twin, compiled,
eager again, localization, remedies), remedies.py (what a localized divergence suggests, and why).

May import (tests/test_structure.py holds it): core/torchtext, core/ingest, core/model,
core/analysis and core's top-level basics; never a view.
"""
