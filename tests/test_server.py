"""`mhalint server` end to end: pytest-lsp's client drives the real server over stdio, as an editor would.

Each test starts its own server on its own workspace (a tmp_path), so the tests share nothing and run in parallel.
"""

from __future__ import annotations

import asyncio
import contextlib
import textwrap
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import pytest
import pytest_lsp
from lsp import (
    WAIT,
    Client,
    Document,
    apply,
    codes,
    diagnostics,
    initialize,
    make_client,
    server_command,
    server_environment,
    wait_for,
)
from lsprotocol import types
from pygls.exceptions import JsonRpcRequestCancelled
from pytest_lsp import ClientServerConfig
from test_project import MODEL, TRAIN

pytestmark = pytest.mark.asyncio

FLIPPED_MASK = """\
    import torch.nn.functional as F

    PAD_ID = 0


    def attend(q, k, v, tokens):
        pad = tokens == PAD_ID
        return F.scaled_dot_product_attention(q, k, v, attn_mask=pad[:, None, None, :])
"""

# MHA007 (a warning with a safe fix); without batch_first=True, MHA001 too (a warning with no fix)
WEIGHTS_DISCARDED = """\
    import torch.nn as nn


    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.attn = nn.MultiheadAttention(64, 8, batch_first=True)

        def forward(self, x):
            out, _ = self.attn(x, x, x)
            return out
"""


def write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@contextlib.asynccontextmanager
async def server(root: Path, options: dict | None = None, editor: str = "visual-studio-code", **environment: str):
    """A server on the workspace `root`, initialized as `editor` initializes it, shut down at the end."""
    client = await ClientServerConfig(server_command(), client_factory=make_client,
                                      server_env=server_environment(**environment)).start()
    try:
        await initialize(client, root, options, editor)
        yield client
        await client.shutdown_session()
    finally:
        if client._server is not None and client._server.returncode is None:  # a failed test: no exit was sent
            client._server.kill()
        await client.stop()


@pytest_lsp.fixture(config=ClientServerConfig(server_command(), client_factory=make_client,
                                              server_env=server_environment()))
async def client(lsp_client: Client, tmp_path: Path):
    await initialize(lsp_client, tmp_path)
    yield
    await lsp_client.shutdown_session()


def path_of(uri: str) -> Path:
    return Path(url2pathname(urlparse(uri).path))


async def test_a_pitfall_is_a_diagnostic_with_its_evidence_where_it_points(client: Client, tmp_path):
    document = Document.open(client, write(tmp_path, "attend.py", FLIPPED_MASK))
    [found] = await document.diagnostics()
    assert found.code == "MHA002" and found.source == "mhalint"
    assert found.severity == types.DiagnosticSeverity.Error
    assert found.message.startswith("F.scaled_dot_product_attention gets attn_mask=`pad[:, None, None, :]`")
    assert (found.range.start.line, found.range.start.character) == (7, 11)  # the call, 0-based
    assert found.range.end.line == 7
    [built, padding] = found.related_information
    assert built.message == "`pad = tokens == PAD_ID` at line 7"
    assert built.location.uri == document.uri and built.location.range.start == types.Position(6, 4)
    assert padding.location.range.start.line == 6
    docs = path_of(found.code_description.href)
    assert docs.name == "MHA002.md" and "# mask-convention-flip (MHA002)" in docs.read_text()


async def test_editing_the_pitfall_away_publishes_an_empty_list(client: Client, tmp_path):
    document = Document.open(client, write(tmp_path, "attend.py", FLIPPED_MASK))
    assert codes(await document.diagnostics()) == ["MHA002"]
    document.replace("attn_mask=pad[", "attn_mask=~pad[")
    assert await document.diagnostics() == []
    document.replace("attn_mask=~pad[", "attn_mask=pad[")  # and back: the unsaved text is what is checked
    assert codes(await document.diagnostics()) == ["MHA002"]


async def test_the_buffer_not_the_file_on_disk_is_checked(client: Client, tmp_path):
    path = write(tmp_path, "attend.py", FLIPPED_MASK.replace("attn_mask=pad", "attn_mask=~pad"))
    document = Document.open(client, path, textwrap.dedent(FLIPPED_MASK))
    assert codes(await document.diagnostics()) == ["MHA002"]


async def test_a_quick_fix_edits_the_text_as_mhalint_fix_would(client: Client, tmp_path):
    document = Document.open(client, write(tmp_path, "block.py", WEIGHTS_DISCARDED))
    [found] = await document.diagnostics()
    assert found.code == "MHA007"
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(document.uri), found.range, types.CodeActionContext([found])))
    titles = [action.title for action in actions]
    fix = next(action for action in actions if action.kind == types.CodeActionKind.QuickFix and action.is_preferred)
    assert "need_weights=False" in fix.title and "(MHA007)" in fix.title
    document.edit(*fix.edit.changes[document.uri])
    assert "out, _ = self.attn(x, x, x, need_weights=False)" in document.text
    assert await document.diagnostics() == []
    assert any(title.startswith("mhalint: add `# noqa: MHA007`") for title in titles)


async def test_an_unsafe_fix_says_it_changes_behaviour_and_is_not_preferred(client: Client, tmp_path):
    document = Document.open(client, write(tmp_path, "attend.py", FLIPPED_MASK))
    [found] = await document.diagnostics()
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(document.uri), found.range, types.CodeActionContext([found])))
    [unsafe] = [action for action in actions if "unsafe" in action.title]
    assert unsafe.title.endswith("(MHA002), unsafe: changes behaviour") and not unsafe.is_preferred
    assert unsafe.diagnostics[0].code == "MHA002"
    assert "attn_mask=~pad[:, None, None, :]" in apply(document.text, unsafe.edit.changes[document.uri])
    # no safe fix in the file, so no fix-all
    assert not [action for action in actions if action.kind == "source.fixAll.mhalint"]


async def test_noqa_action_silences_the_finding(client: Client, tmp_path):
    document = Document.open(client, write(tmp_path, "attend.py", FLIPPED_MASK))
    [found] = await document.diagnostics()
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(document.uri), found.range, types.CodeActionContext([found])))
    [noqa] = [action for action in actions if "noqa" in action.title]
    document.edit(*noqa.edit.changes[document.uri])
    assert document.text.splitlines()[7].endswith("attn_mask=pad[:, None, None, :])  # noqa: MHA002")
    assert await document.diagnostics() == []


async def test_fix_all_applies_every_safe_fix_when_it_is_resolved(client: Client, tmp_path):
    twice = WEIGHTS_DISCARDED + textwrap.indent(textwrap.dedent("""
        def pool(self, x):
            summary, _ = self.attn(x, x, x)
            return summary
    """), "        ")
    document = Document.open(client, write(tmp_path, "block.py", twice))
    assert codes(await document.diagnostics()) == ["MHA007", "MHA007"]
    whole = types.Range(types.Position(0, 0), types.Position(0, 0))
    only = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(document.uri), whole, types.CodeActionContext([], only=["source.fixAll"])))
    [fix_all] = only
    assert fix_all.kind == "source.fixAll.mhalint" and fix_all.edit is None  # computed only when picked
    resolved = await client.code_action_resolve_async(fix_all)
    document.edit(*resolved.edit.changes[document.uri])
    assert document.text.count("need_weights=False") == 2
    assert await document.diagnostics() == []
    quick_only = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(document.uri), whole, types.CodeActionContext([], only=["quickfix"])))
    assert quick_only is None  # nothing left on line 1, and fix-all was not asked for


async def test_fix_all_comes_with_its_edit_for_a_client_that_cannot_resolve(tmp_path):
    document_path = write(tmp_path, "block.py", WEIGHTS_DISCARDED)
    async with server(tmp_path, editor="emacs") as client:  # eglot resolves no code action
        document = Document.open(client, document_path)
        await document.diagnostics()
        actions = await client.text_document_code_action_async(types.CodeActionParams(
            types.TextDocumentIdentifier(document.uri), types.Range(types.Position(0, 0), types.Position(0, 0)),
            types.CodeActionContext([], only=["source"])))
        [fix_all] = actions
        assert "need_weights=False" in apply(document.text, fix_all.edit.changes[document.uri])


async def test_hover_shows_headline_evidence_and_the_rule_documentation(client: Client, tmp_path):
    document = Document.open(client, write(tmp_path, "attend.py", FLIPPED_MASK))
    [found] = await document.diagnostics()
    inside = types.Position(7, 30)
    hovered = await client.text_document_hover_async(types.HoverParams(types.TextDocumentIdentifier(document.uri),
                                                                       inside))
    text = hovered.contents.value
    assert hovered.contents.kind == types.MarkupKind.Markdown and hovered.range == found.range
    assert text.startswith("**MHA002 mask-convention-flip** (error): F.scaled_dot_product_attention gets")
    assert "- `pad = tokens == PAD_ID` at line 7" in text
    assert "Fix (unsafe: it changes behaviour): invert the mask" in text
    assert "### What it does" in text and "```python" in text
    outside = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(document.uri), types.Position(0, 0)))
    assert outside is None


async def test_a_syntax_error_is_a_diagnostic_and_the_server_goes_on(client: Client, tmp_path):
    document = Document.open(client, write(tmp_path, "attend.py", FLIPPED_MASK))
    await document.diagnostics()
    document.replace("def attend(q, k, v, tokens):", "def attend(q, k, v, tokens)")
    [broken] = await document.diagnostics()
    assert broken.code == "MHA900" and broken.severity == types.DiagnosticSeverity.Error
    assert broken.range.start.line == 5 and "syntax error" in broken.message
    document.replace("def attend(q, k, v, tokens)", "def attend(q, k, v, tokens):")
    assert codes(await document.diagnostics()) == ["MHA002"]


NOTEBOOK_CELLS = [
    (types.NotebookCellKind.Markup, "# Attention"),
    (types.NotebookCellKind.Code, "import torch.nn.functional as F\nPAD_ID = 0"),
    (types.NotebookCellKind.Code, "%time x = 1\npad = tokens == PAD_ID\n"
                                  "out = F.scaled_dot_product_attention(q, k, v, attn_mask=pad[:, None, None, :])"),
]


def open_notebook(client: Client, path: Path) -> tuple[str, list[str]]:
    uri = path.as_uri()
    cells = [types.NotebookCell(kind, f"{uri}#cell{number}") for number, (kind, _) in enumerate(NOTEBOOK_CELLS)]
    client.notebook_document_did_open(types.DidOpenNotebookDocumentParams(
        types.NotebookDocument(uri, "jupyter-notebook", 1, cells),
        [types.TextDocumentItem(cell.document, "python" if cell.kind == types.NotebookCellKind.Code else
                                "markdown", 1, text) for cell, (_, text) in zip(cells, NOTEBOOK_CELLS)]))
    return uri, [cell.document for cell in cells]


async def test_a_notebook_gets_diagnostics_on_its_cells(client: Client, tmp_path):
    _, cells = open_notebook(client, tmp_path / "explore.ipynb")
    [found] = await diagnostics(client, cells[2])
    assert found.code == "MHA002" and found.range.start == types.Position(2, 6)  # the cell's own line 3
    assert await diagnostics(client, cells[1]) == []
    [built, _] = found.related_information
    assert built.message == "`pad = tokens == PAD_ID` at cell 3 line 2"
    assert built.location.uri == cells[2] and built.location.range.start.line == 1
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        types.TextDocumentIdentifier(cells[2]), found.range, types.CodeActionContext([found])))
    [unsafe] = [action for action in actions if "unsafe" in action.title]
    assert list(unsafe.edit.changes) == [cells[2]]
    assert "attn_mask=~pad" in apply(NOTEBOOK_CELLS[2][1], unsafe.edit.changes[cells[2]])


async def test_a_notebook_cell_edit_is_checked_again(client: Client, tmp_path):
    uri, cells = open_notebook(client, tmp_path / "explore.ipynb")
    await diagnostics(client, cells[2])
    before = len(client.published)
    line = NOTEBOOK_CELLS[2][1].splitlines()[2]
    client.notebook_document_did_change(types.DidChangeNotebookDocumentParams(
        types.VersionedNotebookDocumentIdentifier(version=2, uri=uri),
        types.NotebookDocumentChangeEvent(cells=types.NotebookDocumentCellChanges(text_content=[
            types.NotebookDocumentCellContentChanges(types.VersionedTextDocumentIdentifier(version=2, uri=cells[2]), [
                types.TextDocumentContentChangePartial(
                    types.Range(types.Position(2, line.index("pad[")), types.Position(2, line.index("pad["))),
                    "~")])]))))
    assert await diagnostics(client, cells[2], after=before) == []


async def test_a_broken_configuration_file_is_a_message_and_the_server_keeps_checking(client: Client, tmp_path):
    write(tmp_path, "pyproject.toml", "[tool.mhalint\nselect = [")
    document = Document.open(client, write(tmp_path, "attend.py", FLIPPED_MASK))
    assert codes(await document.diagnostics()) == ["MHA002"]  # with the defaults standing in
    [message] = await wait_for(lambda: client.messages, "the configuration message")
    assert message.type == types.MessageType.Error
    assert "pyproject.toml: not valid TOML" in message.message and "checking with the defaults" in message.message
    write(tmp_path, "pyproject.toml", '[tool.mhalint]\nignore = ["MHA002"]\n')
    before = len(client.published)
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams([types.FileEvent(
        (tmp_path / "pyproject.toml").as_uri(), types.FileChangeType.Changed)]))
    assert await diagnostics(client, document.uri, after=before) == []
    hovered = await client.text_document_hover_async(types.HoverParams(
        types.TextDocumentIdentifier(document.uri), types.Position(7, 30)))
    assert hovered is None  # the server answers, and the ignored finding is gone
    assert len(client.messages) == 1


async def test_an_unknown_code_in_the_configuration_is_a_message(client: Client, tmp_path):
    write(tmp_path, "mhalint.toml", 'select = ["MHA999"]\n')
    document = Document.open(client, write(tmp_path, "attend.py", FLIPPED_MASK))
    assert codes(await document.diagnostics()) == ["MHA002"]
    [message] = await wait_for(lambda: client.messages, "the configuration message")
    assert "MHA999" in message.message and "mhalint.toml" in message.message


async def test_the_configuration_is_read_again_when_it_changes(client: Client, tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.mhalint]\nmin-severity = "error"\n')
    document = Document.open(client, write(tmp_path, "block.py", WEIGHTS_DISCARDED))
    assert await document.diagnostics() == []  # MHA007 is a warning
    write(tmp_path, "pyproject.toml", '[tool.mhalint]\nmin-severity = "info"\n')
    document.replace("out, _ =", "out, _  =")  # no watcher event: the next check sees the file changed
    assert codes(await document.diagnostics()) == ["MHA007"]
    assert [registration.method for registration in client.registrations] == ["workspace/didChangeWatchedFiles"]


async def test_initialization_options_layer_over_the_file(tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.mhalint]\nmin-severity = "info"\n')
    path = write(tmp_path, "block.py", WEIGHTS_DISCARDED.replace(", batch_first=True", ""))
    async with server(tmp_path, {"ignore": ["MHA007"], "minSeverity": "warning"}) as client:
        assert codes(await Document.open(client, path).diagnostics()) == ["MHA001"]
    async with server(tmp_path, {"select": ["MHA007"]}) as client:
        assert codes(await Document.open(client, path).diagnostics()) == ["MHA007"]
    async with server(tmp_path, {"select": "MHA001", "min-severity": "info"}) as client:
        assert codes(await Document.open(client, path).diagnostics()) == ["MHA001"]


async def test_bad_initialization_options_are_a_message_and_ignored(tmp_path):
    path = write(tmp_path, "attend.py", FLIPPED_MASK)
    async with server(tmp_path, {"min-severity": "loud", "select": ["MHA002"]}) as client:
        assert codes(await Document.open(client, path).diagnostics()) == ["MHA002"]
        [message] = client.messages
        assert "option `min-severity` must be one of info, warning, error" in message.message


async def test_did_change_configuration_sets_the_options(client: Client, tmp_path):
    document = Document.open(client, write(tmp_path, "attend.py", FLIPPED_MASK))
    await document.diagnostics()
    before = len(client.published)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams({"mhalint": {"ignore": ["MHA0"]}}))
    assert await diagnostics(client, document.uri, after=before) == []


async def test_excluded_files_get_no_diagnostics(client: Client, tmp_path):
    write(tmp_path, "pyproject.toml", '[tool.mhalint]\nextend-exclude = ["vendored/"]\n')
    document = Document.open(client, write(tmp_path, "vendored/attend.py", FLIPPED_MASK))
    assert await document.diagnostics() == []


TRAIN_SCRIPT = TRAIN.format(module="model", op="")  # test_project's: model.py's Encoder called in train.py


async def test_an_unsaved_edit_in_another_file_rechecks_the_file_that_depends_on_it(client: Client, tmp_path):
    model = Document.open(client, write(tmp_path, "model.py", MODEL))
    train = Document.open(client, write(tmp_path, "train.py", TRAIN_SCRIPT))
    assert await model.diagnostics() == [] and await train.diagnostics() == []
    before = len(client.published)
    train.replace("encoder(both)", "encoder(both.transpose(0, 1))")  # not saved: the disk still has the old call
    [found] = await diagnostics(client, model.uri, after=before)
    assert found.code == "MHA001" and found.severity == types.DiagnosticSeverity.Error
    assert "train.py:8" in found.message
    unpacking = next(info for info in found.related_information if "a.shape" in info.message)
    assert unpacking.location.uri == train.uri and unpacking.location.range.start.line == 4
    before = len(client.published)
    train.replace("encoder(both.transpose(0, 1))", "encoder(both)")
    assert await diagnostics(client, model.uri, after=before) == []


async def test_a_file_changed_on_disk_rechecks_the_open_files_that_read_it(client: Client, tmp_path):
    model = Document.open(client, write(tmp_path, "model.py", MODEL))
    write(tmp_path, "train.py", TRAIN_SCRIPT)
    assert await model.diagnostics() == []
    before = len(client.published)
    write(tmp_path, "train.py", TRAIN_SCRIPT.replace("encoder(both)", "encoder(both.transpose(0, 1))"))
    client.workspace_did_change_watched_files(types.DidChangeWatchedFilesParams([types.FileEvent(
        (tmp_path / "train.py").as_uri(), types.FileChangeType.Changed)]))
    assert codes(await diagnostics(client, model.uri, after=before)) == ["MHA001"]


async def test_closing_a_document_withdraws_its_diagnostics(client: Client, tmp_path):
    document = Document.open(client, write(tmp_path, "attend.py", FLIPPED_MASK))
    await document.diagnostics()
    before = len(client.published)
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(document.uri)))
    assert await diagnostics(client, document.uri, after=before) == []


async def test_typing_is_checked_once_it_pauses(tmp_path):
    # A debounce far longer than the keystrokes' spacing, so that a loaded machine's pauses cannot split them.
    async with server(tmp_path, {"debounce": 3000}) as client:
        document = Document.open(client, write(tmp_path, "attend.py", FLIPPED_MASK))
        await document.diagnostics()
        before = len(client.published)
        for character in "abcde":  # keystrokes 50 ms apart
            document.replace("PAD_ID = 0", f"PAD_ID = 0  # {character}")
            await asyncio.sleep(0.05)
        assert codes(await document.diagnostics(after=before)) == ["MHA002"]
        versions = [published.version for published in client.published[before:]]
        assert versions[-1] == document.version and len(versions) <= 2  # the first keystroke's, then the last's


WRITE_PLUGIN = {
    "mhalint_test_rules.py": '''
        import time
        from mhalint.rule import Rule


        class Boom(Rule):
            """Fails on a file that says boom."""
            code = "XTS001"
            name = "boom"
            summary = "fails"
            triggers = (r"boom",)
            valid = ()
            invalid = ()

            def visit_Module(self, node):
                if "boom" in self.context.code(node):
                    raise ValueError("boom")


        class Slow(Rule):
            """Takes its time on a file that says slow, asking the budget as the analyses do."""
            code = "XTS002"
            name = "slow"
            summary = "slow"
            triggers = (r"slow",)
            valid = ()
            invalid = ()

            def visit_Module(self, node):
                if "# slow" in self.context.code(node):
                    for _ in range(360_000):  # an hour: only a cancel ends it in a test
                        time.sleep(0.01)
                        self.context.limits.check()
    ''',
    "mhalint_test_rules-0.1.dist-info/METADATA": "Metadata-Version: 2.1\nName: mhalint-test-rules\nVersion: 0.1\n",
    "mhalint_test_rules-0.1.dist-info/entry_points.txt":
        "[mhalint.rules]\nXTS001 = mhalint_test_rules:Boom\nXTS002 = mhalint_test_rules:Slow\n",
}


def plugin_path(tmp_path: Path) -> str:
    site = tmp_path / "site"
    for name, text in WRITE_PLUGIN.items():
        write(site, name, text)
    return str(site)


async def test_a_failing_rule_is_logged_and_skipped_and_the_others_still_report(tmp_path):
    workspace = tmp_path / "workspace"
    path = write(workspace, "attend.py", textwrap.dedent(FLIPPED_MASK) + "# boom\n")
    async with server(workspace, PYTHONPATH=plugin_path(tmp_path)) as client:
        document = Document.open(client, path)
        found = await document.diagnostics()
        assert codes(found) == ["MHA002", "MHA902"]
        failure = next(diagnostic for diagnostic in found if diagnostic.code == "MHA902")
        assert "internal error in rule XTS001 (ValueError: boom)" in failure.message
        logged = await wait_for(lambda: [m for m in client.log_messages if "XTS001" in m.message], "the log")
        assert logged[0].type == types.MessageType.Error and "Traceback" in logged[0].message
        document.replace("# boom", "# boom!")
        await document.diagnostics()
        assert len([m for m in client.log_messages if "XTS001" in m.message]) == 1  # logged once, not per key


async def test_a_cancelled_request_stops_and_the_server_answers_the_next(tmp_path):
    workspace = tmp_path / "workspace"
    path = write(workspace, "attend.py", textwrap.dedent(FLIPPED_MASK) + "# slow\n")
    async with server(workspace, PYTHONPATH=plugin_path(tmp_path)) as client:
        document = Document.open(client, path)  # its check takes an hour unless cancelled
        request = client.protocol.send_request(types.TEXT_DOCUMENT_HOVER, types.HoverParams(
            types.TextDocumentIdentifier(document.uri), types.Position(7, 30)))  # it waits for that check
        [request_id] = [key for key, future in client.protocol._request_futures.items() if future is request]
        await asyncio.sleep(0.5)
        client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=request_id))  # as an editor cancels
        with pytest.raises(JsonRpcRequestCancelled):
            await asyncio.wait_for(asyncio.wrap_future(request), WAIT)
        # The slow check is stale: it stops (had it not, the new text would wait an hour for its turn), and the new
        # text is checked.
        document.replace("# slow", "# fast")
        assert codes(await document.diagnostics()) == ["MHA002"]
        hovered = await client.text_document_hover_async(types.HoverParams(
            types.TextDocumentIdentifier(document.uri), types.Position(7, 30)))
        assert hovered is not None and "MHA002" in hovered.contents.value


async def test_a_document_that_is_not_python_is_left_alone(client: Client, tmp_path):
    notes = (tmp_path / "notes.md").as_uri()
    client.text_document_did_open(types.DidOpenTextDocumentParams(types.TextDocumentItem(
        notes, "markdown", 1, "F.scaled_dot_product_attention(q, k, v, attn_mask=pad)  # is_causal=True\n")))
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(notes)))
    document = Document.open(client, write(tmp_path, "attend.py", FLIPPED_MASK))  # later: all before it is handled
    assert codes(await document.diagnostics()) == ["MHA002"]
    assert [published.uri for published in client.published] == [document.uri]
