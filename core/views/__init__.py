"""The views: one module per view, each a reader of the run model, and the registry of them all.

registry.py declares every view once (name, captures, options, documents, report section, budgets);
report, diff and check are views of the model too; envelope.py is the JSON contract's header.
"""
