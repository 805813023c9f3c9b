"""`tcx cost`'s measurements: profiled calls split into parts, findings ranked, GPU rooflines.

The view itself is core/views/cost.py; these are what it reads and computes.

May import (tests/test_structure.py holds it): core/torchtext, core/ingest, core/model,
core/analysis and core's top-level basics; never a view (the cost view passes in the views its
findings read).
"""
