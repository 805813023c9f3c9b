"""`python -m tcx` runs the command line."""

from tcx.cli.main import main

if __name__ == "__main__":
    main()
