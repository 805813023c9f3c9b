"""`tcx browse`: the terminal app (textual) that walks a whole run.

May import (tests/test_structure.py holds it): the views, the renderers, the model and core's
basics; never the CLI, and nothing in core or the renderers imports it.
"""
