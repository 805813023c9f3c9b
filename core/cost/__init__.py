"""`tcx cost`'s measurements: profiled calls split into parts, findings ranked, GPU rooflines.

The view itself is core/views/cost.py; these are what it reads and computes.
"""
