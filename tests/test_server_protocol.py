"""`mhalint server` at the JSON-RPC level: messages written and read by hand over the real server's stdio, for
what a well-behaved client (pytest-lsp's) never sends or cannot see: malformed params, `exit` without `shutdown`,
and the process's memory over a long session of edits."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from pathlib import Path

import pytest
from lsp import WAIT, server_command, server_environment, wait_for
from pygls.exceptions import JsonRpcInvalidParams

from mhalint.server.app import build

TEXT = "import torch.nn as nn\n\nDIM = 64\nattn = nn.MultiheadAttention(DIM, 8)\n"
INVALID_PARAMS = -32602


class Raw:
    """The server as a subprocess; `send` writes one message, `response` reads until the one answering an id. A
    thread reads everything the server writes, so that it never blocks on a full pipe while the test writes."""

    def __init__(self, root: Path):
        self.errors = (root / "server.stderr").open("wb")
        self.process = subprocess.Popen(server_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=self.errors, env=server_environment(), cwd=root)
        self.messages: queue.Queue[dict | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.uri = (root / "attend.py").as_uri()

    def _read(self) -> None:
        stream = self.process.stdout
        while True:
            length = None
            while (header := stream.readline()) not in (b"\r\n", b""):
                if header.lower().startswith(b"content-length:"):
                    length = int(header.split(b":")[1])
            if not header or length is None:
                self.messages.put(None)
                return
            self.messages.put(json.loads(stream.read(length)))

    def send(self, **message) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
        self.process.stdin.flush()

    def response(self, id: int) -> dict:
        while True:
            try:
                message = self.messages.get(timeout=WAIT)  # a hang guard only
            except queue.Empty:
                raise AssertionError(f"no response to request {id}") from None
            assert message is not None, f"the server stopped before it answered request {id}"
            if message.get("id") == id and "method" not in message:
                return message

    def request(self, id: int, method: str, params) -> dict:
        self.send(id=id, method=method, params=params)
        return self.response(id)

    def start(self) -> None:
        """Initialized, with one Python document open."""
        assert "result" in self.request(0, "initialize", {"processId": None, "rootUri": None, "capabilities": {}})
        self.send(method="initialized", params={})
        self.send(method="textDocument/didOpen", params={"textDocument": {
            "uri": self.uri, "languageId": "python", "version": 1, "text": TEXT}})

    def hover(self, id: int) -> dict:
        """A request answered once the server has dealt with everything sent before it (its check waits for the
        findings of the document's latest text)."""
        return self.request(id, "textDocument/hover", {"textDocument": {"uri": self.uri},
                                                       "position": {"line": 3, "character": 10}})

    def rss(self) -> int:
        """The server's resident memory, in bytes."""
        with open(f"/proc/{self.process.pid}/status") as status:
            line = next(line for line in status if line.startswith("VmRSS:"))
        return int(line.split()[1]) * 1024

    def exited(self) -> int:
        return self.process.wait(timeout=WAIT)

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        self.process.stdin.close()
        self.process.stdout.close()
        self.errors.close()


@pytest.fixture
def raw(tmp_path):
    server = Raw(tmp_path)
    yield server
    server.close()


class Written:
    """The messages an in-process server sends."""

    def __init__(self):
        self.messages: list[dict] = []

    def write(self, data: bytes) -> None:
        self.messages.append(json.loads(data))

    def answer(self, id: int) -> dict | None:
        return next((message for message in self.messages if message.get("id") == id and "method" not in message),
                    None)


@pytest.mark.asyncio
async def test_nothing_finished_stays_in_flight(tmp_path):
    """The cause of the memory growth, seen in pygls's own table of the handlers in flight: a notification's
    future, and the steps of pygls's builtin handlers that call ours, are gone once done (a notification whose
    params cannot be read gets none); and a shutdown that cancels an edit still in flight is answered with its
    result (removing a future while shutdown goes through the table would fail it)."""
    server = build()
    protocol = server.protocol
    written = Written()
    protocol.set_writer(written, include_headers=False)
    uri = (tmp_path / "attend.py").as_uri()

    def feed(**message) -> None:
        protocol.handle_message(json.loads(json.dumps({"jsonrpc": "2.0", **message}),
                                           object_hook=protocol.structure_message))

    def change(version: int) -> None:
        feed(method="textDocument/didChange", params={"textDocument": {"uri": uri, "version": version},
                                                      "contentChanges": [{"text": TEXT + f"# {version}\n"}]})

    try:
        feed(id=0, method="initialize", params={"processId": None, "rootUri": tmp_path.as_uri(), "capabilities": {}})
        feed(method="initialized", params={})
        feed(method="textDocument/didOpen", params={"textDocument": {
            "uri": uri, "languageId": "python", "version": 1, "text": TEXT}})
        for version in range(2, 12):
            change(version)
        with pytest.raises(JsonRpcInvalidParams):  # pygls's read loop reports it and reads on
            feed(method="textDocument/didChange", params={"textDocument": 5, "contentChanges": []})
        feed(id=1, method="textDocument/hover", params={"textDocument": {"uri": uri},
                                                        "position": {"line": 3, "character": 10}})
        await wait_for(lambda: written.answer(1), "the hover")
        await wait_for(lambda: not protocol._request_futures, "no handler in flight")
        change(12)
        feed(id=2, method="shutdown")
        await wait_for(lambda: written.answer(2), "the shutdown")
        assert written.answer(2) == {"jsonrpc": "2.0", "id": 2, "result": None}
        await wait_for(lambda: not protocol._request_futures, "no handler in flight after the shutdown")
    finally:
        server.thread.shutdown()


def edit(raw: Raw, versions: range) -> None:
    """A keystroke per version: DIM's last digit typed over, 4 then 5 then 4..."""
    for version in versions:
        raw.send(method="textDocument/didChange", params={
            "textDocument": {"uri": raw.uri, "version": version},
            "contentChanges": [{"range": {"start": {"line": 2, "character": 7}, "end": {"line": 2, "character": 8}},
                                "text": str(4 + version % 2)}]})


@pytest.mark.slow
def test_the_memory_stays_flat_over_20000_edits(raw):
    """Each edit once kept two finished futures in pygls's table of in-flight requests (about 2.7 MB per 1,000
    edits); the growth from 2,000 edits in to 20,000 edits later is the measure, not the size."""
    raw.start()
    edit(raw, range(2, 2002))
    raw.hover(1)
    before = raw.rss()
    edit(raw, range(2002, 22002))
    raw.hover(2)
    grown = raw.rss() - before
    assert grown < 5 * 2**20, f"the server grew by {grown / 2**20:.1f} MB over 20,000 edits"


def test_exit_after_shutdown_exits_0(raw):
    raw.start()
    assert raw.request(1, "shutdown", None) == {"jsonrpc": "2.0", "id": 1, "result": None}
    raw.send(method="exit")
    assert raw.exited() == 0


def test_exit_without_shutdown_exits_1(raw):
    """As the LSP specifies: the client stopped the server without asking it to shut down."""
    raw.start()
    raw.send(method="exit")
    assert raw.exited() == 1


@pytest.mark.parametrize("params", [
    {"textDocument": 5, "position": {"line": 0, "character": 0}},
    {"textDocument": {"uri": "file:///attend.py"}, "position": "start"},
    "hover here",
    [1, 2],
], ids=["a number for an object", "a string for an object", "a string for the params", "a list for the params"])
def test_a_request_with_wrong_typed_params_gets_invalid_params_and_the_server_goes_on(raw, params):
    raw.start()
    answer = raw.request(7, "textDocument/hover", params)
    assert answer["id"] == 7 and answer["error"]["code"] == INVALID_PARAMS
    assert "result" in raw.hover(8)


def test_a_notification_with_wrong_typed_params_is_dropped_and_the_server_goes_on(raw):
    raw.start()
    for params in ({"textDocument": 5, "contentChanges": []}, "typed", {"textDocument": {"uri": raw.uri}}):
        raw.send(method="textDocument/didChange", params=params)
    assert "result" in raw.hover(1)
    assert raw.request(2, "shutdown", None)["result"] is None
