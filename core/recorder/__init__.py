"""The recorder: runs in the child process with the user's program, installs the capture hooks and
streams events to the recording. The only code that touches torch's internals (feature-detected in
its compat*.py modules).

May import (tests/test_structure.py holds it): core/torchtext, core/ingest, core/model,
core/numerics and core's top-level basics; never a view, core/run or core/fix.
"""
