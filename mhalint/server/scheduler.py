"""When each open document is checked.

An edit after a pause is checked at once; edits that follow each other within the debounce window (typing) are
checked once the typing has paused that long, so a burst of keystrokes costs one check, not one per key. A newer
text cancels the check of an older one (it stops within milliseconds, mhalint.run.budget.Cancelled), and only the
outcome of the text the editor still has is published.
"""

from __future__ import annotations

import asyncio
import math
import threading
from typing import Awaitable, Callable


class Scheduler:
    def __init__(self, run: Callable[[str, threading.Event], Awaitable[None]],
                 settled: Callable[[str], Awaitable[None]], debounce: float):
        """`run(key, cancel)` checks the document now and publishes; `cancel` is set when its text is stale.
        `settled(key)` follows each run, once the document has no check running (those waiting for an outcome
        look again then)."""
        self.run = run
        self.settled = settled
        self.debounce = debounce
        self._last_change: dict[str, float] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._running: dict[str, tuple[asyncio.Task, threading.Event]] = {}
        self._tasks: set[asyncio.Task] = set()  # held until done: the loop keeps only weak references

    def changed(self, key: str) -> None:
        """The document's text changed: check it at once after a pause, else when the typing pauses."""
        now = asyncio.get_running_loop().time()
        quiet = now - self._last_change.get(key, -math.inf)
        self._last_change[key] = now
        self._schedule(key, 0.0 if quiet >= self.debounce else self.debounce)

    def soon(self, key: str) -> None:
        """Check it now: opened, saved, asked about, or something it depends on changed."""
        self._schedule(key, 0.0)

    def later(self, key: str) -> None:
        """Check it after the debounce window: another document it depends on is being edited."""
        if key not in self._timers:
            self._schedule(key, self.debounce)

    def pending(self, key: str) -> bool:
        return key in self._timers or key in self._running

    def hurry(self, key: str) -> None:
        """Someone waits for the document's findings: a check the debounce holds back starts now, and one starts
        if none is due; a running check is left to finish."""
        if key in self._timers or key not in self._running:
            self.soon(key)

    def forget(self, key: str) -> None:
        """The document was closed: nothing more for it."""
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        running = self._running.get(key)
        if running is not None:
            running[1].set()
        self._last_change.pop(key, None)

    def _schedule(self, key: str, delay: float) -> None:
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        running = self._running.get(key)
        if running is not None:
            running[1].set()  # its text is no longer the editor's
        self._timers[key] = asyncio.get_running_loop().call_later(delay, self._start, key)

    def _start(self, key: str) -> None:
        self._timers.pop(key, None)
        cancel = threading.Event()
        task = asyncio.get_running_loop().create_task(self._run(key, cancel))
        self._running[key] = (task, cancel)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, key: str, cancel: threading.Event) -> None:
        try:
            await self.run(key, cancel)
        finally:
            if self._running.get(key, (None, None))[1] is cancel:
                del self._running[key]
        await self.settled(key)
