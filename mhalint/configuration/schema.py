"""The range of every numeric setting, in one table that the configuration file, the command line's options and the
language server's options all check against.

mhalint runs on untrusted repositories (CI on a fork's pull request, pre-commit in a cloned repository), whose
settings may be hostile: a memory cap of 2**63 MB, a timeout of 1e308 s, nan, an integer of a thousand digits.
Each is refused where it is read, in one line that says the range, rather than failing deep in the run (the
probe's `setrlimit`, a timer). The bounds are wide: the lower ones keep a setting able to do its job, the upper
ones are past any use (a day, a terabyte) and inside what the system calls accept.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Number:
    key: str  # as the configuration file spells it ("probe.memory"); the server's and jobs are not in the file
    kind: type  # int or float (a float setting takes an integer too)
    low: float
    high: float  # math.inf: no upper bound (jobs, clamped to the machine instead)
    unit: str
    doc: str

    @property
    def range(self) -> str:
        """What the setting takes: `a whole number of MB from 256 to 1,048,576`."""
        what = f"{'a whole' if self.kind is int else 'a'} number of {self.unit}"
        if self.high == math.inf:
            return f"{what}, {_figure(self.low)} or more"
        return f"{what} from {_figure(self.low)} to {_figure(self.high)}"

    def check(self, value: object) -> int | float:
        """`value` when it is a number of the setting's kind within its range; else a ValueError that says so."""
        kinds = int if self.kind is int else int | float
        if isinstance(value, bool) or not isinstance(value, kinds) or not self.low <= value <= self.high:
            raise ValueError(f"must be {self.range} (got {shown(value)})")  # nan fails the comparison
        return value

    def parse(self, text: str) -> int | float:
        """The command line's `text` as the setting's number, checked."""
        try:
            value = self.kind(text)
        except ValueError:  # not a number, or an integer of more digits than Python converts
            raise ValueError(f"must be {self.range} (got {shown(text)})") from None
        return self.check(value)


def _figure(number: float) -> str:
    return f"{int(number):,}" if number == int(number) else f"{number:g}"


def shown(value: object) -> str:
    """A setting's value in an error message: short and on one line, whatever the file held."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"an integer of {value.bit_length():,} bits"  # its digits could be thousands
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "a table"
    text = repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def named(key: str) -> str:
    """A key the file or the client wrote, as an error message names it: as written, unless that would break the
    line (a newline in a quoted TOML key) or run on."""
    return key if key.isprintable() and len(key) <= 40 else shown(key)


NUMBERS = {number.key: number for number in (
    Number("file-time-limit", float, 0.1, 86_400, "seconds", "seconds one file's check may take (past it: MHA903)"),
    Number("file-memory-limit", int, 1, 2**20, "MB", "MB of memory one file's check may take (past it: MHA903)"),
    Number("probe.timeout", float, 0.1, 3_600, "seconds", "seconds one site's experiment may take"),
    Number("probe.total-timeout", float, 1, 86_400, "seconds",
           "seconds the whole probe run may take, torch import included"),
    Number("probe.memory", int, 256, 2**20, "MB", "MB of address space the probe process may take"),
    Number("jobs", int, 1, math.inf, "processes",
           "processes to check files in; more than the usable CPUs or the files to check is clamped"),
    Number("debounce", float, 0, 60_000, "milliseconds",
           "milliseconds of quiet typing before the language server checks a changed document"),
)}


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity (a container's or taskset's limit) where the system keeps
    one, else the machine's count."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


def pool_size(jobs: int | None, tasks: int) -> int:
    """Worker processes for `tasks` tasks: `jobs` (None: as many as can run at once), but never more than the usable
    CPUs, nor than the tasks; more would only take memory and time to start."""
    return max(1, min(jobs or math.inf, usable_cpus(), tasks))
