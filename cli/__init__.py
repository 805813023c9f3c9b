"""The `tcx` command: click commands that parse options, call core and pick a renderer.

May import (tests/test_structure.py holds it): everything in tcx, it is the top floor; nothing in
core, the renderers or the TUI imports it. `tcx --help` imports neither torch nor the model.
"""
