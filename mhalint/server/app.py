"""`mhalint server`: the language server over stdio (pygls), wiring the protocol to the session.

The protocol runs on asyncio's loop in the main thread; every check, fix and change to the project index runs on
one session thread, in the order it was asked for, so the warm state is never read while it changes. Requests that
need findings wait for the outcome of the text the editor has now; a request the client cancels stops its work.
Nothing a document holds can take the server down: a file that does not parse is an MHA900 diagnostic, a rule
that fails is an MHA902 diagnostic with its traceback in the client's log, and a configuration that cannot be
used is a message, with the defaults standing in for it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import functools
import os
import sys
import threading
import traceback
from typing import Any, Callable, TypeVar

from lsprotocol import types
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from mhalint import __version__
from mhalint.finding import SAFE, Finding
from mhalint.run.budget import Cancelled
from mhalint.server import actions
from mhalint.server.diagnostics import Placed, diagnostic
from mhalint.server.hover import hover
from mhalint.server.options import ClientOptions, OptionsError
from mhalint.server.protocol import Protocol
from mhalint.server.rule_docs import RuleDocs
from mhalint.server.scheduler import Scheduler
from mhalint.server.session import CONFIG_NAMES, Outcome, Session, Source

T = TypeVar("T")
PYTHON_SUFFIXES = (".py", ".pyi")
_WATCHED = ("**/*.py", *(f"**/{name}" for name in CONFIG_NAMES))


class MhalintServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("mhalint", __version__, text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
                         notebook_document_sync=types.NotebookDocumentSyncOptions(
                             notebook_selector=[types.NotebookDocumentFilterWithNotebook(
                                 notebook="jupyter-notebook", cells=[types.NotebookCellLanguage("python")])],
                             save=True), protocol_cls=Protocol)
        self.shut_down = False  # the client asked for shutdown: the exit code is 0, else 1
        self.session: Session | None = None
        self.docs: RuleDocs | None = None
        self.scheduler = Scheduler(self._check, self._settled, ClientOptions().debounce)
        self.outcomes: dict[str, Outcome] = {}  # the published outcome of each document, by key
        self.diagnostics: dict[str, dict[Finding, types.Diagnostic]] = {}
        self.published_cells: dict[str, set[str]] = {}  # a notebook's cell URIs that were given diagnostics
        self.said: set[str] = set()  # tracebacks already logged, so that a failing rule is not logged at each key
        self.shown: set[str] = set()  # problems shown and not gone from every document: not reported at each key
        self.updated = asyncio.Condition()
        self.thread = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mhalint-session")

    # ---- running on the session thread ----
    async def on_session(self, function: Callable[..., T], *args) -> T:
        return await asyncio.get_running_loop().run_in_executor(self.thread, functools.partial(function, *args))

    async def cancellable(self, function: Callable[..., T], *args) -> T:
        """`function(*args, cancel)` on the session thread; a cancelled request (the client's $/cancelRequest)
        sets `cancel`, which stops a check within milliseconds."""
        cancel = threading.Event()
        try:
            return await self.on_session(function, *args, cancel)
        except asyncio.CancelledError:
            cancel.set()
            raise

    # ---- documents ----
    def key_of(self, uri: str) -> str | None:
        """The document a URI belongs to: a notebook for its cells, else the text document itself, when it is
        Python."""
        notebook = self.workspace.get_notebook_document(notebook_uri=uri) or \
            self.workspace.get_notebook_document(cell_uri=uri)
        if notebook is not None:
            return notebook.uri
        document = self.workspace.text_documents.get(uri)
        if document is None:
            return None
        if document.language_id == "python" or (document.path or "").endswith(PYTHON_SUFFIXES):
            return uri
        return None

    def source(self, key: str) -> Source | None:
        """The document as the editor has it now, or None once it is closed."""
        notebook = self.workspace.get_notebook_document(notebook_uri=key)
        if notebook is not None:
            cells = {number: self.workspace.get_text_document(cell.document).source
                     for number, cell in enumerate(notebook.cells, start=1) if cell.kind == types.NotebookCellKind.Code}
            path, on_disk = self._path(key)
            return Source(key, path, notebook.version, cells=cells, on_disk=on_disk)
        document = self.workspace.text_documents.get(key)
        if document is None:
            return None
        path, on_disk = self._path(key)
        return Source(key, path, document.version, text=document.source, on_disk=on_disk)

    def cell_uris(self, key: str) -> dict[int, str]:
        notebook = self.workspace.get_notebook_document(notebook_uri=key)
        if notebook is None:
            return {}
        return {number: cell.document for number, cell in enumerate(notebook.cells, start=1)
                if cell.kind == types.NotebookCellKind.Code}

    def _path(self, uri: str) -> tuple[str, bool]:
        """(the file-system path, whether it is one) of a document; a buffer never saved is named in the first
        workspace folder."""
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if path is not None:
            return os.path.abspath(path), True
        root = self.session.roots[0] if self.session and self.session.roots else os.getcwd()
        return os.path.join(root, uri.rsplit("/", 1)[-1].rsplit(":", 1)[-1] or "untitled.py"), False

    def placed(self, source: Source) -> Placed:
        return Placed(source, self.workspace.position_encoding or types.PositionEncodingKind.Utf16,
                      self.cell_uris(source.key), self._text_of)

    def _text_of(self, path: str) -> str | None:
        """Another file's text, for evidence that points into it: its buffer, else the disk."""
        for document in self.workspace.text_documents.values():
            if document.path and os.path.abspath(document.path) == path:
                return document.source
        try:
            with open(path, encoding="utf-8", errors="replace") as handle:
                return handle.read()
        except OSError:
            return None

    # ---- checking and publishing ----
    async def _check(self, key: str, cancel: threading.Event) -> None:
        source = self.source(key)
        if source is None:
            return
        try:
            outcome = await self.on_session(self.session.check, source, cancel)
        except Cancelled:
            return
        except Exception:  # a bug of the server's own, not of a rule (those are MHA902 findings): say so, go on
            self.log(f"mhalint: checking {key} failed:\n{traceback.format_exc()}", types.MessageType.Error)
            outcome = Outcome(source, ())
        current = self.source(key)
        if current is not None and current.version == source.version:
            self.publish(outcome)

    async def _settled(self, key: str) -> None:
        async with self.updated:
            self.updated.notify_all()

    def publish(self, outcome: Outcome) -> None:
        source = outcome.source
        placed = self.placed(source)
        client = self.client_capabilities.text_document
        publishing = client.publish_diagnostics if client is not None else None
        related = bool(publishing and publishing.related_information)
        described = bool(publishing and publishing.code_description_support)
        made = {finding: diagnostic(finding, placed, self.docs, related, described) for finding in outcome.findings}
        self.outcomes[source.key] = outcome
        self.diagnostics[source.key] = made
        problems = {problem for checked in self.outcomes.values() for problem in checked.problems}
        for problem in sorted(problems - self.shown):
            self.show(f"mhalint: {problem}; checking with the defaults in its place until it is fixed")
        self.shown = problems  # a problem gone from every open document is shown again if it comes back
        for text in outcome.tracebacks:
            self.log_once(f"mhalint: a rule failed on {source.path} and was skipped for the rest of it "
                          f"(MHA902):\n{text}")
        if not source.is_notebook:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                source.key, list(made.values()), source.version))
            return
        by_cell: dict[str, list[types.Diagnostic]] = {uri: [] for uri in placed.cell_uris.values()}
        for finding, made_one in made.items():
            by_cell.setdefault(placed.uri(finding.cell), []).append(made_one)
        gone = self.published_cells.get(source.key, set()) - set(by_cell)
        for uri in [*by_cell, *sorted(gone)]:
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri, by_cell.get(uri, [])))
        self.published_cells[source.key] = set(by_cell)

    def clear(self, key: str) -> None:
        """A closed document's diagnostics are withdrawn (a document mhalint never published for, as a Markdown
        file, gets nothing)."""
        published = self.diagnostics.pop(key, None) is not None
        self.outcomes.pop(key, None)
        for uri in sorted(self.published_cells.pop(key, set())) or ([key] if published else []):
            self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri, []))

    async def current(self, key: str) -> Outcome | None:
        """The outcome of the document's text as the editor has it now, waiting for its check (sooner, if it was
        held back by the debounce); None once the document is closed."""
        async with self.updated:
            while True:
                source = self.source(key)
                if source is None:
                    return None
                outcome = self.outcomes.get(key)
                if outcome is not None and outcome.source.version == source.version:
                    return outcome
                self.scheduler.hurry(key)
                await self.updated.wait()

    async def recheck(self, keys: set[str], now: bool = False) -> None:
        for key in sorted(keys):
            if self.source(key) is not None:
                (self.scheduler.soon if now else self.scheduler.later)(key)

    # ---- messages ----
    def log(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        self.window_log_message(types.LogMessageParams(kind, message))

    def log_once(self, message: str) -> None:
        if message not in self.said:
            self.said.add(message)
            self.log(message, types.MessageType.Error)

    def show(self, message: str) -> None:
        self.window_show_message(types.ShowMessageParams(types.MessageType.Error, message))
        self.log(message, types.MessageType.Error)

    def configure(self, raw: Any) -> ClientOptions:
        try:
            return ClientOptions.parse(raw)
        except OptionsError as error:
            self.show(f"mhalint: {error}; the options are ignored until they are fixed")
            return ClientOptions()


def initialize(ls: MhalintServer, params: types.InitializeParams) -> None:
    roots = [to_fs_path(folder.uri) for folder in params.workspace_folders or []]
    if not roots and (params.root_uri or params.root_path):
        roots = [to_fs_path(params.root_uri) if params.root_uri else params.root_path]
    options = ls.configure(params.initialization_options)
    ls.session = Session([os.path.abspath(root) for root in roots if root], options)
    ls.docs = RuleDocs(ls.session.rules)
    ls.scheduler.debounce = options.debounce


async def initialized(ls: MhalintServer, params: types.InitializedParams) -> None:
    workspace = ls.client_capabilities.workspace
    watching = workspace.did_change_watched_files if workspace is not None else None
    if watching is not None and watching.dynamic_registration:
        ls.client_register_capability(types.RegistrationParams([types.Registration(
            "mhalint-watched-files", types.WORKSPACE_DID_CHANGE_WATCHED_FILES,
            types.DidChangeWatchedFilesRegistrationOptions(
                [types.FileSystemWatcher(glob_pattern=pattern) for pattern in _WATCHED]))]))


def shutdown(ls: MhalintServer, params: None) -> None:
    ls.shut_down = True
    ls.thread.shutdown(wait=False, cancel_futures=True)


async def did_open(ls: MhalintServer, params: types.DidOpenTextDocumentParams) -> None:
    await _opened(ls, params.text_document.uri, now=True)


async def did_change(ls: MhalintServer, params: types.DidChangeTextDocumentParams) -> None:
    await _opened(ls, params.text_document.uri, now=False)


async def did_open_notebook(ls: MhalintServer, params: types.DidOpenNotebookDocumentParams) -> None:
    await _opened(ls, params.notebook_document.uri, now=True)


async def did_change_notebook(ls: MhalintServer, params: types.DidChangeNotebookDocumentParams) -> None:
    await _opened(ls, params.notebook_document.uri, now=False)


async def _opened(ls: MhalintServer, uri: str, *, now: bool) -> None:
    key = ls.key_of(uri)
    source = ls.source(key) if key is not None else None
    if source is None:
        return
    (ls.scheduler.soon if now else ls.scheduler.changed)(key)
    await ls.recheck(await ls.on_session(ls.session.opened, source))


async def did_save(ls: MhalintServer, params: types.DidSaveTextDocumentParams) -> None:
    await _saved(ls, params.text_document.uri)


async def did_save_notebook(ls: MhalintServer, params: types.DidSaveNotebookDocumentParams) -> None:
    await _saved(ls, params.notebook_document.uri)


async def _saved(ls: MhalintServer, uri: str) -> None:
    """A saved configuration file is read again (its open documents are checked with it); a saved document whose
    check the debounce was holding back is checked now."""
    path = to_fs_path(uri) if uri.startswith("file:") else None
    if path is not None and os.path.basename(path) in CONFIG_NAMES:
        await ls.recheck(await ls.on_session(ls.session.files_changed, [path]), now=True)
        return
    key = ls.key_of(uri)
    if key is not None and ls.scheduler.pending(key):
        ls.scheduler.soon(key)


async def did_close(ls: MhalintServer, params: types.DidCloseTextDocumentParams) -> None:
    await _closed(ls, params.text_document.uri)


async def did_close_notebook(ls: MhalintServer, params: types.DidCloseNotebookDocumentParams) -> None:
    await _closed(ls, params.notebook_document.uri)


async def _closed(ls: MhalintServer, uri: str) -> None:
    path, on_disk = ls._path(uri)
    ls.scheduler.forget(uri)
    ls.clear(uri)
    await ls.recheck(await ls.on_session(ls.session.closed, Source(uri, path, None, on_disk=on_disk)))


async def did_change_watched_files(ls: MhalintServer, params: types.DidChangeWatchedFilesParams) -> None:
    paths = [to_fs_path(change.uri) for change in params.changes if change.uri.startswith("file:")]
    await ls.recheck(await ls.on_session(ls.session.files_changed, paths), now=True)


async def did_change_configuration(ls: MhalintServer, params: types.DidChangeConfigurationParams) -> None:
    settings = params.settings
    if isinstance(settings, dict) and "mhalint" in settings:
        options = ls.configure(settings["mhalint"])
        ls.scheduler.debounce = options.debounce
        await ls.recheck(await ls.on_session(ls.session.configure, options), now=True)


async def _located(ls: MhalintServer, uri: str) -> tuple[Outcome, Placed, int | None] | None:
    """The current outcome of the document a request names, its text as placed, and the cell the URI is, if any."""
    key = ls.key_of(uri)
    outcome = await ls.current(key) if key is not None else None
    if outcome is None:
        return None
    placed = ls.placed(outcome.source)
    return outcome, placed, _cell(placed, uri)


async def on_hover(ls: MhalintServer, params: types.HoverParams) -> types.Hover | None:
    located = await _located(ls, params.text_document.uri)
    if located is None:
        return None
    outcome, placed, cell = located
    point = placed.lines(cell).point(params.position)
    found = [finding for finding in outcome.findings if finding.cell == cell and _covers(finding, point, point)]
    if not found:
        return None
    client = ls.client_capabilities.text_document
    formats = client.hover.content_format if client is not None and client.hover is not None else None
    markdown = not formats or types.MarkupKind.Markdown in formats
    return hover(found, ls.docs, placed.location(found[0]).range, markdown)


async def on_code_action(ls: MhalintServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
    located = await _located(ls, params.text_document.uri)
    if located is None:
        return None
    outcome, placed, cell = located
    key = outcome.source.key
    lines = placed.lines(cell)
    start, end = lines.point(params.range.start), lines.point(params.range.end)
    only = params.context.only
    found = []
    if actions.wanted(types.CodeActionKind.QuickFix, only):
        found = actions.quick_fixes([f for f in outcome.findings if f.cell == cell and _covers(f, start, end)],
                                    placed, ls.diagnostics.get(key, {}))
    if actions.wanted(actions.FIX_ALL, only) and any(
            finding.fix is not None and finding.fix.applicability == SAFE for finding in outcome.findings):
        if _resolves_edits(ls):
            found.append(actions.fix_all(placed, None, {"key": key, "version": outcome.source.version}))
        else:
            found.append(actions.fix_all(placed, await ls.cancellable(ls.session.fix_all, outcome.source)))
    return found or None


async def on_code_action_resolve(ls: MhalintServer, action: types.CodeAction) -> types.CodeAction:
    data = action.data if isinstance(action.data, dict) else {}
    key = data.get("key")
    outcome = await ls.current(key) if isinstance(key, str) else None
    if outcome is None or outcome.source.version != data.get("version") or action.kind != actions.FIX_ALL:
        return action  # the document changed since the action was offered: nothing to apply
    fixed = await ls.cancellable(ls.session.fix_all, outcome.source)
    return actions.fix_all(ls.placed(outcome.source), fixed, action.data)


def _cell(placed: Placed, uri: str) -> int | None:
    return next((number for number, cell_uri in placed.cell_uris.items() if cell_uri == uri), None)


def _covers(finding: Finding, start: tuple[int, int], end: tuple[int, int]) -> bool:
    """Whether the finding's span and the range [start, end] meet (a finding without an end spans its line)."""
    first = (finding.line, finding.column)
    last = (finding.end_line, finding.end_column) if finding.end_line else (finding.line, 10**9)
    return first <= end and start <= last


def _resolves_edits(ls: MhalintServer) -> bool:
    """Whether the client fills a code action's edit in later (codeAction/resolve), so that fixing the whole file
    is only computed when the user picks it."""
    client = ls.client_capabilities.text_document
    support = client.code_action.resolve_support if client is not None and client.code_action else None
    return support is not None and "edit" in support.properties


def build() -> MhalintServer:
    """A server with every feature registered."""
    server = MhalintServer()
    for method, options, handler in (
            (types.INITIALIZE, None, initialize),
            (types.INITIALIZED, None, initialized),
            (types.SHUTDOWN, None, shutdown),
            (types.TEXT_DOCUMENT_DID_OPEN, None, did_open),
            (types.TEXT_DOCUMENT_DID_CHANGE, None, did_change),
            (types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False), did_save),
            (types.TEXT_DOCUMENT_DID_CLOSE, None, did_close),
            (types.NOTEBOOK_DOCUMENT_DID_OPEN, None, did_open_notebook),
            (types.NOTEBOOK_DOCUMENT_DID_CHANGE, None, did_change_notebook),
            (types.NOTEBOOK_DOCUMENT_DID_SAVE, None, did_save_notebook),
            (types.NOTEBOOK_DOCUMENT_DID_CLOSE, None, did_close_notebook),
            (types.WORKSPACE_DID_CHANGE_WATCHED_FILES, None, did_change_watched_files),
            (types.WORKSPACE_DID_CHANGE_CONFIGURATION, None, did_change_configuration),
            (types.TEXT_DOCUMENT_HOVER, None, on_hover),
            (types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
                code_action_kinds=[types.CodeActionKind.QuickFix, actions.FIX_ALL], resolve_provider=True),
             on_code_action),
            (types.CODE_ACTION_RESOLVE, None, on_code_action_resolve)):
        server.feature(method, options)(handler)
    return server


def serve() -> None:
    """Speak LSP over standard input and output until the client says exit (or closes them); exit 0 if the client
    asked for shutdown before, else 1, as the LSP specifies (pygls's start_io swallows the SystemExit that says so)."""
    server = build()
    server.start_io()
    sys.exit(0 if server.shut_down else 1)
