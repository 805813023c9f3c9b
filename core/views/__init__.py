"""The views: one module per view, each a reader of the run model, and the registry of them all.

registry.py declares every view once (name, captures, options, documents, report section, budgets);
report, diff and check are views of the model too; envelope.py is the JSON contract's header;
rank_pool.py builds the per-rank facts of ranks.py in forked workers on many cores.

A view imports the model, the analyses and the measurements below it (core/cost, core/numerics);
never core/run, core/fix or the CLI above it (tests/test_structure.py holds every stage to this).
"""
