"""pygls's LSP protocol with two of its gaps closed (pygls 2.0 to 2.1.1 alike; pyproject allows pygls 2.x).

Both overrides touch pygls internals, `_execute_handler` and `_request_futures`: tests/test_server_protocol.py
checks through them that nothing finished stays in flight, and drives the real server to check the memory and the
answers."""

from __future__ import annotations

import asyncio
from concurrent.futures import Future
from typing import Any

from pygls.exceptions import JsonRpcException
from pygls.protocol import LanguageServerProtocol


class Protocol(LanguageServerProtocol):
    def _execute_handler(self, msg_id, *args, **kwargs) -> None:
        """pygls keeps the future of each handler it runs in `_request_futures` (for $/cancelRequest and
        shutdown to find) but removes it only when it answers a request with it: a notification's future, and
        each step of a builtin generator handler (didChange's call to ours is one), stayed for good, two finished
        futures per edit, about 2.7 MB per 1,000 edits. Here each goes once done. The removal waits for the loop:
        a future that shutdown cancels runs its callbacks at once, while shutdown is still going through the
        table."""
        super()._execute_handler(msg_id, *args, **kwargs)
        future = getattr(self, "_request_futures", {}).get(msg_id)
        if future is not None:
            loop = asyncio.get_running_loop()
            future.add_done_callback(lambda done: loop.call_soon_threadsafe(self._forget, msg_id, done))

    def _forget(self, msg_id, future: Future | asyncio.Future) -> None:
        if self._request_futures.get(msg_id) is future:  # not a later request that reused the id
            del self._request_futures[msg_id]

    def structure_message(self, data: dict[str, Any]) -> Any:
        """A request whose params do not have the method's types gets an error response (InvalidParams), as
        JSON-RPC requires, where pygls only logs it and leaves the client waiting; the error then goes on to be
        reported as pygls reports a message it cannot read."""
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            if "method" in data and isinstance(data.get("id"), (int, str)):
                self._send_response(data["id"], error=error.to_response_error())
            raise
