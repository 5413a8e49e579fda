"""`python -m mhalint.probe`: the probe worker process (reads sites as JSON on stdin)."""

from mhalint.probe.worker import main

main()
