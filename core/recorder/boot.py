"""The recorder child's entry point, run as a script: `python .../recorder/boot.py SPEC_JSON`.

Not `-m` (that puts the current directory first on sys.path, and a project with a `tcx/` folder
there would shadow the installed tcx) and not `-c` (its `<string>` frame would sit at the bottom
of every stack tcx records). As a script, Python puts this folder first on sys.path; it is taken
off before anything is imported, and the child sets the program's own sys.path[0] as Python would.
The frame of this file is one of tcx's own (core/frames.is_recorder_frame) and never shown.
"""

import sys

del sys.path[0]

from tcx.core.recorder.child import main  # noqa: E402  (after the path is fixed)

sys.exit(main(sys.argv[1:]))
