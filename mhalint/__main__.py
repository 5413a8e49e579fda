"""`python -m mhalint` runs the command line."""

from mhalint.cli import main

main()
