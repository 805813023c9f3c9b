"""tcx: make torch.compile explain itself."""

__version__ = "0.1.0"
