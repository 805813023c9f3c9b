"""Running the program: the driver of the recorder child, process supervision, targets, ranks.

driver.py (start the child, enforce the timeout, keep what it wrote), processes.py, targets.py
(what TARGET names), callspec.py, forked.py (work on more cores), progress.py,
command_run.py (`tcx record -- CMD`), run_series.py (`tcx cache`), observed.py, last_run.py,
inputs.py (a saved recording or a TORCH_TRACE log opened as a RunModel; runs nothing).

May import (tests/test_structure.py holds it): core/views and everything below them (core/cost,
core/numerics, core/analysis, core/model, core/ingest, core/torchtext, core's basics); not core/fix.
"""
