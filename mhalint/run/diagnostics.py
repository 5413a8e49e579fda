"""The engine's own findings (MHA900 and up), reported like a rule's so that one bad file never stops a run: a file
that cannot be parsed or read, a rule that failed on it, a file past its budget, a worker process that died."""

from __future__ import annotations

import traceback
from typing import TYPE_CHECKING

from mhalint.configuration.schema import NUMBERS
from mhalint.context import ModuleContext
from mhalint.finding import Finding, Severity
from mhalint.names import printable
from mhalint.parse.lazy import cst
from mhalint.run import noqa
from mhalint.run.budget import FileBudget

if TYPE_CHECKING:
    from mhalint.run.engine import Result
    from mhalint.run.workers import WorkerLost

PARSE_ERROR = "MHA900"
READ_ERROR = "MHA901"
INTERNAL_ERROR = "MHA902"
TOO_COMPLEX = "MHA903"
ENGINE_CODES = {
    PARSE_ERROR: "could not parse this file",
    READ_ERROR: "could not read this file",
    INTERNAL_ERROR: "a rule failed on this file (internal error)",
    TOO_COMPLEX: "too large or too complex to analyse",
    noqa.UNUSED_NOQA: "unused noqa directive",
}
# What `mhalint rule MHA900` prints for the engine's own codes: what happened, and what to do.
ENGINE_EXPLANATIONS = {
    PARSE_ERROR: ("The file is not valid Python for libcst (a syntax error, or syntax newer than libcst reads), so "
                  "no rule could look at it. The report gives the line and the parser's message; the other files "
                  "are still checked. Fix the syntax, or exclude the file (`--exclude`, `extend-exclude`), or "
                  "hide the report with `--ignore MHA900`."),
    READ_ERROR: ("The file could not be read: permission denied, a broken symlink, not a regular file (a FIFO, a "
                 "socket or a device, which mhalint never opens), bytes that are not in its declared encoding, a "
                 "UTF-16 or UTF-32 file or null bytes (which Python refuses as source too), or a notebook that is "
                 "not valid JSON. The report gives the reason; the other files are still checked. `--ignore "
                 "MHA901` hides such reports."),
    INTERNAL_ERROR: ("A rule raised an exception on this file: a bug in mhalint or in a plugin rule, never in the "
                     "checked code. That file's other findings are kept, the run goes on, and the exit status is "
                     "2. `--show-traceback` prints the traceback; please report it with the file (or a reduced "
                     "copy)."),
    TOO_COMPLEX: (f"Checking this file would pass its time or memory budget: `file-time-limit` "
                  f"({NUMBERS['file-time-limit'].range}; default {FileBudget.seconds:g}) or `file-memory-limit` "
                  f"({NUMBERS['file-memory-limit'].range}; default {FileBudget.megabytes:,}) in the "
                  "configuration. The report gives the reason: "
                  "the syntax tree its size predicts (judged before parsing, from its tokens), the memory the "
                  "analysis took, or the time it ran. The file's other findings are not reported, the other files "
                  "are still checked, and the outcome is not cached. Such a file is usually generated or vendored "
                  "code: exclude it (`extend-exclude`), or raise the limit."),
    noqa.UNUSED_NOQA: ("A `# noqa: MHA001` comment on a line where no enabled rule reports MHA001: it suppresses "
                       "nothing, so it would hide a later finding nobody has looked at (ruff's RUF100). Only codes "
                       "of the rules that ran are judged; another linter's codes (`# noqa: E501`) are left alone. "
                       "A bare `# noqa` that suppresses no mhalint finding is reported at info severity (shown with "
                       "`--min-severity info`), since it often serves another linter. `--fix` removes the unused "
                       "codes, or the directive (a bare one only with `--unsafe-fixes`); `--ignore MHA904` turns "
                       "the check off."),
}


def internal_error(path: str, line: int, code: str, error: Exception, result: Result) -> Finding:
    """MHA902 for one rule on one file, with the traceback kept for --show-traceback."""
    result.internal_errors += 1
    result.tracebacks.append(f"{printable(path)}: {code}\n{traceback.format_exc()}")
    return Finding(path, line, 1, INTERNAL_ERROR, name="internal-error", severity=Severity.ERROR,
                   message=f"internal error in rule {code} ({type(error).__name__}: {error}); the rest of this "
                           f"file was not checked by {code}. Run with --show-traceback and report it.")


def line_or_one(context: ModuleContext, node: cst.CSTNode) -> int:
    try:
        return context.line(node)
    except Exception:  # positions themselves may be what failed
        return 1


def engine_finding(path: str, code: str, reason: str, line: int = 1, column: int = 1) -> Finding:
    return Finding(path, line, column, code, message=f"{ENGINE_CODES[code]}: {reason}",
                   name=ENGINE_CODES[code], severity=Severity.ERROR)


def lost(path: str, error: WorkerLost) -> tuple[list[Finding], list[str], bool]:
    """The outcome of a file whose worker process died while checking it: an internal error, and the run goes on."""
    finding = Finding(path, 1, 1, INTERNAL_ERROR, name="internal-error", severity=Severity.ERROR,
                      message=f"internal error: {error} while checking this file; the other files are still "
                              f"checked. Please report it with the file (or a reduced copy).")
    return [finding], [f"{printable(path)}: {error}"], False
