"""The pytest plugin of the runtime guard (registered as the `mhalint` pytest11 entry point).

Off unless asked for:

    pytest --mhalint-guard                # AttentionGuardWarnings, and an "mhalint guard" summary at the end
    pytest --mhalint-guard-mode=error     # a test whose attention call shows a pitfall fails (AttentionGuardError)
    pytest --mhalint-guard=error          # the same

When off, this module only adds the option: it imports neither torch nor the guard's machinery. When on, one guard
is active from configuration (so module-level code of test files is covered) to the end of the run; warnings are
de-duplicated per (code, call site) over the whole run, and the summary counts every occurrence.

`--mhalint-guard` is a flag, so `pytest --mhalint-guard test_model.py::test_x` runs that test (an option with an
optional value would take the test as its value). The mode is `--mhalint-guard-mode`, which turns the guard on
too; `--mhalint-guard=warn` and `--mhalint-guard=error` are registered as option names of their own, which argparse
matches before it splits at `=`, so those spellings keep working (another value after `=` is refused).
"""

from __future__ import annotations

import argparse

from mhalint import INSTALL_TORCH
from mhalint.finding import shorten

_MODES = ("warn", "error")


def pytest_addoption(parser) -> None:
    group = parser.getgroup("mhalint", "mhalint runtime attention guard")
    group.addoption("--mhalint-guard", action="store_true", default=False, dest="mhalint_guard",
                    help="check every nn.MultiheadAttention / Transformer / scaled_dot_product_attention call the "
                         "tests make for silent attention pitfalls: issue AttentionGuardWarnings and print a "
                         "summary (see --mhalint-guard-mode). Off unless given.")
    group.addoption("--mhalint-guard-mode", choices=_MODES, default=None, dest="mhalint_guard_mode",
                    help="turn the guard on in this mode: 'warn' (the default of --mhalint-guard) or 'error', which "
                         "fails a test whose attention call shows a pitfall. --mhalint-guard=error also works.")
    for mode in _MODES:  # the old spelling of the mode, as exact option names (see the module docstring)
        group.addoption(f"--mhalint-guard={mode}", action="store_const", const=mode, dest="mhalint_guard_mode",
                        help=argparse.SUPPRESS)


def pytest_configure(config) -> None:
    mode = config.getoption("mhalint_guard_mode", None)
    if mode is None and not config.getoption("mhalint_guard", False):
        return
    mode = mode or "warn"
    plugin = GuardPlugin(mode)
    config.add_cleanup(plugin._stop)  # restores torch even if the run ends abnormally
    config.pluginmanager.register(plugin, "mhalint-guard-session")


class GuardPlugin:
    """The active part, registered only when the option is given."""

    def __init__(self, mode: str):
        import pytest

        from mhalint.guard import guard
        try:
            import torch  # noqa: F401  (imported here, only when the guard is asked for)
        except ImportError:
            raise pytest.UsageError(f"--mhalint-guard needs torch, which is not installed: {INSTALL_TORCH}") from None
        self.mode = mode
        self.guard = guard(mode)
        self.guard.__enter__()
        self.active = True

    def _stop(self) -> None:
        if self.active:
            self.active = False
            self.guard.__exit__(None, None, None)

    def pytest_terminal_summary(self, terminalreporter) -> None:
        entries = self.guard.reports()
        terminalreporter.section("mhalint guard")
        if not entries:
            terminalreporter.line(f"no attention pitfalls seen in {self.guard.calls} checked attention calls "
                                  f"({self.mode} mode)")
            return
        for entry in entries:
            report = entry.report
            headline = shorten(report.headline, 110)
            terminalreporter.line(f"{report.code} {report.name:<28} {entry.count:>5}x  {report.site}  {headline}")
        sites = len({entry.report.site for entry in entries})
        total = sum(entry.count for entry in entries)
        terminalreporter.line(f"{len(entries)} pitfall(s) at {sites} call site(s), {total} occurrence(s) in "
                              f"{self.guard.calls} checked attention calls ({self.mode} mode)")

    def pytest_unconfigure(self, config) -> None:
        self._stop()
