"""The views: one module per view, each a reader of the run model, and the registry of them all.

registry.py declares every view once (name, captures, options, documents, report section, budgets);
report, diff and check are views of the model too; envelope.py is the JSON contract's header;
rank_pool.py builds the per-rank facts of ranks.py in forked workers on many cores.

May import (tests/test_structure.py holds it): core/torchtext, core/ingest, core/model,
core/analysis, core/cost, core/numerics and core's top-level basics; never core/run, core/fix or
the CLI above it.
"""
