"""`tcx browse`: the terminal app (textual) that walks a whole run."""
