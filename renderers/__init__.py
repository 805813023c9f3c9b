"""One renderer per view and format (terminal, JSON, Markdown, HTML, SARIF...): they consume the
views' typed results and never import torch.

May import (tests/test_structure.py holds it): core's typed results and facts (core/views,
core/model, core/analysis, core/cost, core/fix, core/numerics, core/ingest, core/torchtext, the
basics); never the CLI or the TUI, and nothing in core imports a renderer.
"""
