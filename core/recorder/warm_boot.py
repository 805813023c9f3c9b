"""The warm recorder's entry point, run as a script:
`python .../recorder/warm_boot.py SOCKET IDLE_S [tied] [preview]`.

A script for the reasons boot.py gives (its folder is taken off sys.path before anything is
imported). In each fork, `serve` returns the recorder child's argv and this file runs it as
boot.py would; the server itself returns None and exits.
"""

import sys

del sys.path[0]

from tcx.core.recorder.warm import serve  # noqa: E402  (after the path is fixed)

_argv = serve(sys.argv[1], float(sys.argv[2]), "tied" in sys.argv[3:], "preview" in sys.argv[3:])
if _argv is None:
    sys.exit(0)
sys.argv = [sys.argv[0], *_argv]

from tcx.core.recorder.child import main  # noqa: E402

sys.exit(main(_argv))
