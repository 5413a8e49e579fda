"""The pytest plugin of the runtime guard (registered as the `mhalint` pytest11 entry point).

Off unless asked for:

    pytest --mhalint-guard          # AttentionGuardWarnings, and an "mhalint guard" summary at the end
    pytest --mhalint-guard=error    # a test whose attention call shows a pitfall fails with AttentionGuardError

When off, this module only adds the option: it imports neither torch nor the guard's machinery. When on, one guard
is active from configuration (so module-level code of test files is covered) to the end of the run; warnings are
de-duplicated per (code, call site) over the whole run, and the summary counts every occurrence.

Write the mode with `=`: `--mhalint-guard error` also works, but a bare `--mhalint-guard` directly followed by a
test path would take the path as its mode (argparse's optional value), and pytest then says it is not a mode.
"""

from __future__ import annotations

from mhalint import INSTALL_TORCH
from mhalint.finding import shorten

_MODES = ("warn", "error")


def pytest_addoption(parser) -> None:
    group = parser.getgroup("mhalint", "mhalint runtime attention guard")
    group.addoption("--mhalint-guard", action="store", nargs="?", const="warn", default=None, choices=_MODES,
                    dest="mhalint_guard", metavar="MODE",
                    help="check every nn.MultiheadAttention / Transformer / scaled_dot_product_attention call the "
                         "tests make for silent attention pitfalls: 'warn' (the default when given) issues "
                         "AttentionGuardWarnings and prints a summary, 'error' fails the test. Off unless given.")


def pytest_configure(config) -> None:
    mode = config.getoption("mhalint_guard", None)
    if mode is None:
        return
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
