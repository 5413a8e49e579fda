"""The language server's parts without the protocol: the options an editor sends, positions in the client's
units, the places evidence names, the session's checks and what a change re-checks, the scheduler's debounce,
and the server command without its extra."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from lsp import apply, server_environment
from lsprotocol import types
from wrapped import CALLER, ENCODER

from mhalint import HOME
from mhalint.analysis.project import Project
from mhalint.analysis.references import Place, places
from mhalint.finding import Severity
from mhalint.run.budget import Cancelled, Limits
from mhalint.server.convert import Lines, replacement
from mhalint.server.options import ClientOptions, OptionsError
from mhalint.server.scheduler import Scheduler
from mhalint.server.session import Session, Source, encoded

# ---- options ----


def test_options_take_the_configuration_spelling_and_camel_case():
    options = ClientOptions.parse({"select": ["mha0", "MHA1,MHA9"], "extendSelect": "MHA904", "ignore": [],
                                   "minSeverity": "info", "debounce": 150})
    assert options == ClientOptions(select=("MHA0", "MHA1", "MHA9"), extend_select=("MHA904",), ignore=(),
                                    min_severity="info", debounce=0.15)
    assert ClientOptions.parse(None) == ClientOptions.parse({}) == ClientOptions()


@pytest.mark.parametrize(("raw", "says"), [
    ([], "the options must be an object"),
    ({"selct": ["MHA001"]}, "unknown option `selct`"),
    ({"select": 1}, "option `select` must be a list of rule codes"),
    ({"ignore": ["MHA001", 2]}, "option `ignore` must be a list"),
    ({"min-severity": "loud"}, "option `min-severity` must be one of info, warning, error"),
    ({"debounce": -1}, "option `debounce` must be a number of milliseconds"),
    ({"debounce": True}, "option `debounce` must be a number"),
    ({"debounce": float("nan")}, "option `debounce` must be a number"),
])
def test_bad_options_say_which_and_why(raw, says):
    with pytest.raises(OptionsError, match=says.replace("(", r"\(")):
        ClientOptions.parse(raw)


# ---- positions ----


def test_columns_are_counted_in_the_units_the_client_chose():
    text = "s = 'é😀'; f(x)\n"
    column = text.index("f(") + 1  # mhalint's: code points from 1
    assert Lines(text, types.PositionEncodingKind.Utf32).position(1, column) == types.Position(0, 10)
    assert Lines(text, types.PositionEncodingKind.Utf16).position(1, column) == types.Position(0, 11)
    assert Lines(text, types.PositionEncodingKind.Utf8).position(1, column) == types.Position(0, 14)
    for encoding in (types.PositionEncodingKind.Utf8, types.PositionEncodingKind.Utf16,
                     types.PositionEncodingKind.Utf32):
        lines = Lines(text, encoding)
        assert lines.point(lines.position(1, column)) == (1, column)


def test_lines_break_as_python_breaks_them_not_at_form_feeds():
    lines = Lines("a\x0cb = 1\r\nc = 2\rd = 3")
    assert lines.lines == ["a\x0cb = 1", "c = 2", "d = 3"]
    assert lines.position(3, 1) == types.Position(2, 0)
    assert lines.line_range(2) == types.Range(types.Position(1, 0), types.Position(1, 5))
    assert lines.range(2, 3, 0, 0) == types.Range(types.Position(1, 2), types.Position(1, 5))  # no end: the line's


@pytest.mark.parametrize(("old", "new"), [
    ("a = 1\nb = 2\n", "a = 1\nb = 3\n"),
    ("x = f(q)\n", "x = f(q, need_weights=False)\n"),
    ("a\r\nb\r\n", "a\nb\r\n"),
    ("é😀 = 1\n", "é😀 = 2  # noqa: MHA001\n"),
    ("same\n", "same\n"),
    ("", "new\n"),
])
def test_one_replacement_turns_the_old_text_into_the_new(old, new):
    edit = replacement(old, new, types.PositionEncodingKind.Utf16)
    assert apply(old, [edit]) == new
    assert len(edit.new_text) <= len(new)


# ---- evidence places ----


def test_places_are_read_in_the_three_ways_rules_write_them():
    assert places("`pad = tokens == PAD_ID` at line 32") == [Place(32)]
    assert places("`B, T, C = a.shape` at pkg/train.py:5, then line 7") == [Place(5, path="pkg/train.py"),
                                                                            Place(7)]
    assert places("built at cell 3 line 2 (`pad`)") == [Place(2, cell=3)]
    assert places("need_weights is not passed (default True)") == []
    assert places("lines 3-5, online 4, x.pyc:3") == []


# ---- cancelling a check ----


def test_a_set_cancel_event_stops_the_check_at_its_next_look():
    cancel = threading.Event()
    limits = Limits(None, cancel)
    limits.check()
    cancel.set()
    time.sleep(0.03)
    with pytest.raises(Cancelled):
        limits.check()


def test_the_session_check_stops_when_cancelled_from_another_thread(tmp_path, monkeypatch):
    """Another thread sets the cancel event in the middle of the analysis (at the budget's 1,000th look, so the
    order does not depend on the machine's speed): the check raises Cancelled instead of finishing, and keeps no
    outcome."""
    text = "import torch.nn as nn\n" + "".join(
        f"attn{i} = nn.MultiheadAttention(64, 8)\nout{i}, _ = attn{i}(x, x, x)\n" for i in range(3000))
    session = Session([str(tmp_path)])
    source = Source("file:///big.py", str(tmp_path / "big.py"), 1, text=text)
    cancel = threading.Event()
    looks = {"before": 0, "after": 0}
    real_check = Limits.check

    def check(limits):
        looks["after" if cancel.is_set() else "before"] += 1
        if looks["before"] == 1000 and not cancel.is_set():
            setter = threading.Thread(target=cancel.set)
            setter.start()
            setter.join()
        real_check(limits)

    monkeypatch.setattr(Limits, "check", check)
    with pytest.raises(Cancelled):
        session.check(source, cancel)
    assert looks["before"] == 1000  # it had not finished when the event was set
    assert "file:///big.py" not in session.outcomes


# ---- the session ----

FLIPPED = textwrap.dedent("""\
    import torch.nn.functional as F

    PAD_ID = 0

    def attend(q, k, v, tokens):
        pad = tokens == PAD_ID
        return F.scaled_dot_product_attention(q, k, v, attn_mask=pad[:, None, None, :])
""")

MODEL = textwrap.dedent("""\
    import torch.nn as nn

    class Encoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = nn.TransformerEncoderLayer(64, 8, batch_first=True)

        def forward(self, src):
            return self.layer(src)
""")

TRAIN = textwrap.dedent("""\
    from model import Encoder

    def step(a):
        B, T, C = a.shape
        return Encoder()(a{op})
""")


def source(root: Path, name: str, text: str, version: int = 1) -> Source:
    return Source((root / name).as_uri(), str(root / name), version, text=text)


def test_a_notebook_is_checked_as_its_cells_joined_and_reported_in_cell_lines(tmp_path):
    session = Session([str(tmp_path)])
    cells = {1: "import torch.nn.functional as F\nPAD_ID = 0",
             3: "pad = tokens == PAD_ID\nF.scaled_dot_product_attention(q, k, v, attn_mask=pad[:, None, None, :])"}
    outcome = session.check(Source("file:///n.ipynb", str(tmp_path / "n.ipynb"), 1, cells=cells))
    [finding] = outcome.findings
    assert (finding.code, finding.cell, finding.line) == ("MHA002", 3, 2)
    assert any("cell 3 line 1" in sentence for sentence in finding.evidence)


def test_the_findings_follow_the_settings_of_the_nearest_configuration(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "mhalint.toml").write_text('ignore = ["MHA002"]\n')
    session = Session([str(tmp_path)])
    assert [f.code for f in session.check(source(tmp_path, "a.py", FLIPPED)).findings] == ["MHA002"]
    assert session.check(source(tmp_path / "sub", "a.py", FLIPPED)).findings == ()
    session = Session([str(tmp_path)], ClientOptions(select=("MHA001",)))
    assert session.check(source(tmp_path, "a.py", FLIPPED)).findings == ()


def test_a_change_rechecks_the_open_documents_whose_analysis_read_it(tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "train.py").write_text(TRAIN.format(op=""))
    session = Session([str(tmp_path)])
    model = source(tmp_path, "model.py", MODEL)
    outcome = session.check(model)
    assert outcome.findings == () and outcome.reads == {str(tmp_path / "train.py")}
    train = source(tmp_path, "train.py", TRAIN.format(op=".transpose(0, 1)"))
    assert session.opened(train) == {model.key}  # the buffer is what model.py's analysis reads now
    [finding] = session.check(model).findings
    assert finding.code == "MHA001" and "train.py:5" in finding.message
    unrelated = source(tmp_path, "other.py", "x = 1\n")
    assert session.opened(unrelated) == set()
    assert session.closed(train) == {model.key}  # back to the disk's text
    assert session.check(model).findings == ()


def test_a_new_importer_rechecks_the_file_it_imports_from(tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    session = Session([str(tmp_path)])
    model = source(tmp_path, "model.py", MODEL)
    assert session.check(model).findings == ()
    (tmp_path / "train.py").write_text(TRAIN.format(op=".transpose(0, 1)"))
    assert session.files_changed([str(tmp_path / "train.py")]) == {model.key}  # a file that appeared
    assert [f.code for f in session.check(model).findings] == ["MHA001"]
    assert session.files_changed([str(tmp_path / "pyproject.toml")]) == {model.key}  # settings: all of them


def test_fix_all_applies_the_safe_fixes_only(tmp_path):
    text = textwrap.dedent("""\
        import torch.nn as nn

        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = nn.MultiheadAttention(64, 8, batch_first=True)

            def forward(self, x, tokens):
                out, _ = self.attn(x, x, x, key_padding_mask=tokens != 0)
                return out
    """)
    session = Session([str(tmp_path)])
    fixed = session.fix_all(source(tmp_path, "block.py", text))
    assert "need_weights=False" in fixed.text and "tokens != 0" in fixed.text  # MHA002's fix is unsafe
    assert session.fix_all(fixed) is None


def test_a_buffer_keeps_the_encoding_it_declares():
    assert encoded("# -*- coding: latin-1 -*-\nname = 'é'\n") == "# -*- coding: latin-1 -*-\nname = 'é'\n".encode(
        "latin-1")
    assert encoded("# -*- coding: latin-1 -*-\nname = '😀'\n").decode("utf-8")  # cannot be latin-1: UTF-8
    assert encoded("name = 'é'\n") == "name = 'é'\n".encode()


def test_the_project_forgets_what_it_read_of_a_changed_file(tmp_path):
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "train.py").write_text(TRAIN.format(op=""))
    overlay: dict[str, bytes] = {}
    project = Project([str(tmp_path / "model.py"), str(tmp_path / "train.py")], overlay=overlay)
    assert [i.path for i in project.importers(str(tmp_path / "model.py"), "Encoder")] == [str(tmp_path / "train.py")]
    overlay[str(tmp_path / "train.py")] = b"x = 1\n"
    assert project.changed(str(tmp_path / "train.py")) == {str(tmp_path / "model.py")}
    assert project.importers(str(tmp_path / "model.py"), "Encoder") == []
    assert project.changed(str(tmp_path / "train.py")) == set()  # nothing new since
    (tmp_path / "late.py").write_text("from model import Encoder as E\n")
    assert project.changed(str(tmp_path / "late.py")) == {str(tmp_path / "model.py")}
    assert [(i.path, i.local) for i in project.importers(str(tmp_path / "model.py"), "Encoder")] == [
        (str(tmp_path / "late.py"), "E")]


# ---- the scheduler ----


class VirtualClockLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock moves only while nothing is ready to run, straight to the next timer: a scenario's
    timings are exact, whatever else the machine is doing. For scenarios without I/O or threads."""

    def __init__(self):
        super().__init__()
        self._now = 0.0
        select = self._selector.select

        def without_waiting(timeout=None):
            events = select(0)
            if not events and timeout:
                self._now += timeout
            return events

        self._selector.select = without_waiting

    def time(self) -> float:
        return self._now


def run_on_virtual_clock(scenario):
    loop = VirtualClockLoop()
    try:
        return loop.run_until_complete(scenario())
    finally:
        loop.close()


def test_an_edit_after_a_pause_is_checked_at_once_and_typing_once_it_pauses():
    async def scenario():
        runs: list[tuple[str, float]] = []
        started = asyncio.get_running_loop().time()

        async def run(key, cancel):
            runs.append((key, asyncio.get_running_loop().time() - started))

        async def settled(key):
            pass

        scheduler = Scheduler(run, settled, debounce=0.2)
        scheduler.changed("a")  # after a pause (the first change): at once
        await asyncio.sleep(0.05)
        for _ in range(4):  # typing, 50 ms apart
            scheduler.changed("a")
            await asyncio.sleep(0.05)
        await asyncio.sleep(0.4)
        return runs

    runs = run_on_virtual_clock(scenario)
    assert [key for key, _ in runs] == ["a", "a"]
    assert runs[0][1] == 0 and runs[1][1] == pytest.approx(0.2 + 0.2)  # the last keystroke at 0.2 s, then 0.2 s


def test_a_newer_text_cancels_the_running_check():
    async def scenario():
        events: list[threading.Event] = []

        async def run(key, cancel):
            events.append(cancel)
            await asyncio.sleep(0.2)

        async def settled(key):
            pass

        scheduler = Scheduler(run, settled, debounce=0.1)
        scheduler.soon("a")
        await asyncio.sleep(0.05)
        assert scheduler.pending("a")
        scheduler.soon("a")
        await asyncio.sleep(0.3)
        return events, scheduler.pending("a")

    events, pending = run_on_virtual_clock(scenario)
    assert [event.is_set() for event in events] == [True, False] and not pending


# ---- the command ----


def test_without_the_server_extra_it_says_what_to_install(tmp_path):
    fake = tmp_path / "pygls"
    fake.mkdir()
    (fake / "__init__.py").write_text("")  # a pygls without pygls.lsp: as good as none
    completed = subprocess.run([sys.executable, "-m", "mhalint", "server"], capture_output=True, text=True,
                               env=server_environment(PYTHONPATH=str(tmp_path)), timeout=60, stdin=subprocess.DEVNULL)
    assert completed.returncode == 2
    assert completed.stderr.strip() == ("mhalint: error: the server needs pygls and lsprotocol, which are not "
                                        "installed: in a clone of mhalint, pip install -e '.[server]'; else pip "
                                        f"install 'mhalint[server] @ git+{HOME}'")
    assert completed.stdout == ""


def test_the_linter_does_not_import_the_server_or_pygls():
    code = ("import sys, mhalint.cli.main, mhalint.run.engine, mhalint.rule; mhalint.rule.load_rules(); "
            "print(json.dumps(sorted(m for m in sys.modules\n"
            "                        if m.startswith(('pygls', 'lsprotocol', 'mhalint.server')))))")
    completed = subprocess.run([sys.executable, "-c", "import json; " + code], capture_output=True, text=True,
                               timeout=60, check=True)
    assert json.loads(completed.stdout) == []


def test_a_workspace_folder_inside_a_project_sees_the_whole_project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "lib").mkdir()
    (tmp_path / "scripts").mkdir()
    model = tmp_path / "lib" / "model.py"
    model.write_text(ENCODER)
    (tmp_path / "scripts" / "train.py").write_text(CALLER.format(module="lib.model", unpack="B, T, C"))
    session = Session([str(tmp_path / "lib")])
    [finding] = session.check(Source(model.as_uri(), str(model), 1, text=model.read_text())).findings
    assert finding.severity == Severity.ERROR and "train.py" in finding.message
