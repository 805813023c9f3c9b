"""What the views conclude from the model: remedies, restarts, compile phases, tied sizes, kernels.

Torch-free; each module reads typed facts of core/model/ and is shared by two or more views.

May import (tests/test_structure.py holds it): core/torchtext, core/ingest, core/model and core's
top-level basics; never a view.
"""
