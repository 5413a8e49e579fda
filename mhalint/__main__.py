"""`python -m mhalint` runs the command line.

`python -m` puts the current directory first on sys.path, so the checked repository's own files would shadow
the modules mhalint imports (libcst, click) and its `*.dist-info` folders would register rule plugins: running
mhalint in a repository would run that repository's code. The entry is dropped before anything else is
imported, which makes `python -m mhalint` behave as the `mhalint` console script does."""

import os
import sys

if sys.path and sys.path[0] in ("", os.getcwd()):
    del sys.path[0]

from mhalint.cli.main import console  # noqa: E402  (after the path is made safe)

console()
