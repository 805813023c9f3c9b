"""tcx's engine: the stages of the pipeline, one folder each, and the basics they share.

torchtext (torch's text formats) → ingest (recordings and logs) → model (the run's facts) →
analysis → cost and numerics → views → run and fix; the recorder runs in the child process. The
top-level modules are the basics: budgets, errors, files, frames and pysource below every stage,
selection and selectors over the model.

May import (tests/test_structure.py holds it): only tcx's own package and core itself; never the
CLI, the renderers, the TUI or tcx.api above it.
"""
