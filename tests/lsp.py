"""A test client for `mhalint server` over stdio (pytest-lsp's, recording every publish with its version), and the
helpers the end-to-end tests share: open and edit documents, wait for a document's diagnostics, apply edits."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from lsprotocol import types
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES, register_lsp_features

from mhalint.parse.source import LINE_BREAK, line_starts

WAIT = 300.0  # seconds a test waits for a publish before it fails: a hang guard, never what a test asserts


@dataclass
class Published:
    uri: str
    version: int | None
    diagnostics: list[types.Diagnostic]
    at: float = field(default_factory=time.monotonic)


class Client(LanguageClient):
    """pytest-lsp's client, plus every publishDiagnostics in the order it came, and file-watcher registrations
    accepted as an editor accepts them."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.published: list[Published] = []
        self.registrations: list[types.Registration] = []


def make_client() -> Client:
    client = Client()

    def publish(client: Client, params: types.PublishDiagnosticsParams) -> None:
        client.diagnostics[params.uri] = params.diagnostics
        client.published.append(Published(params.uri, params.version, list(params.diagnostics)))

    def register(client: Client, params: types.RegistrationParams) -> None:
        client.registrations.extend(params.registrations)

    register_lsp_features(client, {**DEFAULT_CLIENT_FEATURES, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS: publish,
                                   types.CLIENT_REGISTER_CAPABILITY: register})
    return client


def server_command() -> list[str]:
    return [sys.executable, "-m", "mhalint", "server"]


def server_environment(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1", **extra}


async def initialize(client: Client, root: Path, options: dict | None = None, editor: str = "visual-studio-code"):
    return await client.initialize_session(types.InitializeParams(
        capabilities=client_capabilities(editor), initialization_options=options,
        workspace_folders=[types.WorkspaceFolder(root.as_uri(), root.name)]))


async def wait_for(predicate, what: str, timeout: float = WAIT):
    """Poll `predicate()` until it returns something truthy; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        found = predicate()
        if found:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


async def diagnostics(client: Client, uri: str, version: int | None = None, after: int = 0) -> list[types.Diagnostic]:
    """The diagnostics of the first publish for `uri` (for `version`, when given) among those from index `after`
    on."""
    def found():
        for published in client.published[after:]:
            if published.uri == uri and (version is None or published.version == version):
                return [published]
        return None
    [published] = await wait_for(found, f"diagnostics of {uri} version {version}")
    return published.diagnostics


@dataclass
class Document:
    """A Python document the test has opened, with the text the editor holds."""

    client: Client
    uri: str
    text: str
    version: int = 1

    @classmethod
    def open(cls, client: Client, path: Path, text: str | None = None) -> "Document":
        text = path.read_text() if text is None else text
        document = cls(client, path.as_uri(), text)
        client.text_document_did_open(types.DidOpenTextDocumentParams(
            types.TextDocumentItem(document.uri, "python", document.version, text)))
        return document

    def replace(self, old: str, new: str) -> None:
        """An incremental change, as an editor sends a keystroke's: the first `old` becomes `new`."""
        start = self.text.index(old)
        self.edit(types.TextEdit(types.Range(position(self.text, start), position(self.text, start + len(old))), new))

    def edit(self, *edits: types.TextEdit) -> None:
        self.version += 1
        self.text = apply(self.text, edits)
        self.client.text_document_did_change(types.DidChangeTextDocumentParams(
            types.VersionedTextDocumentIdentifier(version=self.version, uri=self.uri),
            [types.TextDocumentContentChangePartial(range=edit.range, text=edit.new_text) for edit in edits]))

    async def diagnostics(self, after: int = 0) -> list[types.Diagnostic]:
        return await diagnostics(self.client, self.uri, self.version, after)


def position(text: str, offset: int) -> types.Position:
    """The LSP position (UTF-16 columns) of a character offset."""
    starts = line_starts(text)
    line = max(index for index, start in enumerate(starts) if start <= offset)
    return types.Position(line, len(text[starts[line]:offset].encode("utf-16-le")) // 2)


def offset(text: str, where: types.Position) -> int:
    starts = line_starts(text)
    line_text = LINE_BREAK.split(text)[where.line]
    units = 0
    for index, character in enumerate(line_text):
        if units >= where.character:
            return starts[where.line] + index
        units += len(character.encode("utf-16-le")) // 2
    return starts[where.line] + len(line_text)


def apply(text: str, edits) -> str:
    """`text` with LSP edits applied, as an editor applies a WorkspaceEdit's edits to one document."""
    spans = sorted(((offset(text, edit.range.start), offset(text, edit.range.end), edit.new_text) for edit in edits),
                   reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


def codes(found: list[types.Diagnostic]) -> list[str]:
    return sorted(str(diagnostic.code) for diagnostic in found)
