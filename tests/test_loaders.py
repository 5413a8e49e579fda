"""Batches from a DataLoader built away from the loop that reads it (mhalint/analysis/loaders.py): through a
factory function, in this file or another, an element of a tuple a setup function returns, and `x, y = batch`;
and what a project `collate_fn` gives (pad_sequence's default: sequence-first).

Each way both ways: the default collate's batch axis fed straight to a module built without batch_first is an
error that names the DataLoader; the transposed twin, or a collate function that pads sequence-first, is info;
a loader or collate function whose batches cannot be read stays a warning.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from test_mha001_layout import assert_batch_first_error, assert_sequence_first_info, assert_unknown_warning

from mhalint.finding import Severity
from mhalint.rule import load_rules
from mhalint.run.engine import Checker

CODE = "MHA001"


@pytest.fixture
def one(lint):
    """The single MHA001 finding of a snippet, at any severity."""
    def run(source: str):
        found = lint(source, CODE, min_severity="info")
        assert len(found) == 1, [(f.line, str(f.severity), f.message) for f in found]
        return found[0]
    return run


MODEL = """\
    import torch.nn as nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.TransformerEncoderLayer(64, 8)

        def forward(self, x):
            return self.encoder({data})
"""

COLLATE = """\
    import torch.nn as nn
    from torch.nn.utils.rnn import pad_sequence
    from torch.utils.data import DataLoader

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(1000, 64)
            self.encoder = nn.TransformerEncoderLayer(64, 8)

        def forward(self, ids):
            return self.encoder(self.embed(ids))

    def get_data(dataset):
        def collate(samples):
            ids, labels = [], []
            for sample, label in samples:
                ids.append(sample)
                labels.append(label)
            return {padded}, labels
        return DataLoader(dataset, batch_size=16, collate_fn=collate), len(dataset)

    def train(model, loader):
        for ids, labels in loader:
            model(ids)

    def main(dataset):
        loader, size = get_data(dataset)
        train(Model(), loader)
"""


def test_a_collate_function_that_pads_sequence_first_gives_sequence_first_batches(one):
    finding = one(COLLATE.format(padded="pad_sequence(ids, padding_value=0)"))
    assert_sequence_first_info(finding, "pad_sequence(ids, padding_value=0)",
                               "the DataLoader's batches are what `collate` returns")


def test_a_collate_function_that_pads_batch_first_gives_batch_first_batches(one):
    finding = one(COLLATE.format(padded="pad_sequence(ids, batch_first=True)"))
    assert_batch_first_error(finding, "pad_sequence(ids, batch_first=True)", "what `collate` returns")


@pytest.mark.parametrize("padded", ["torch.stack(ids)", "pad_sequence(ids, batch_first=flag)"])
def test_a_collate_function_whose_output_is_not_known_stays_unknown(one, padded):
    assert_unknown_warning(one(COLLATE.format(padded=padded).replace("import torch.nn", "import torch\n    import torch.nn")))


def test_a_collate_function_that_is_not_the_projects_stays_unknown(one):
    source = COLLATE.format(padded="pad_sequence(ids)").replace("collate_fn=collate", "collate_fn=default_collate")
    assert_unknown_warning(one(source))


def test_an_element_of_a_batch_unpacked_after_the_loop_keeps_the_collated_axes(one):
    source = textwrap.dedent(MODEL.format(data="x")) + textwrap.dedent("""\
        from torch.utils.data import DataLoader

        def train(dataset):
            model = Model()
            for batch in DataLoader(dataset, batch_size=32):
                x, y = batch
                model(x)
    """)
    assert_batch_first_error(one(source), "DataLoader(dataset, batch_size=32)")
    assert_sequence_first_info(one(source.replace("model(x)", "model(x.transpose(0, 1))")),
                               "DataLoader(dataset, batch_size=32)", "x.transpose(0, 1)")
    assert_unknown_warning(one(source.replace("x, y = batch", "x, y = batch, None\n        x = x[0]")))


def mha001(root: Path):
    return [f for f in Checker([load_rules()[CODE]]).check_paths([root], jobs=1).findings if f.code == CODE]


def write(root: Path, files: dict[str, str]) -> None:
    (root / "pyproject.toml").write_text("")
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))


DATA = """\
    from torch.utils.data import DataLoader

    def load_dataset(dataset, batch_size=32):
        loader = DataLoader(dataset, batch_size=batch_size, shuffle=True)
        return {returned}
"""

TRAIN = """\
    from models.model import Model
    from utils.data import load_dataset

    loader = load_dataset([])
    model = Model()
    for batch in loader:
        x, y = batch
        model(x)
"""


@pytest.mark.parametrize(("data", "returned", "expected"), [
    ("x", "loader", "error"), ("x.transpose(0, 1)", "loader", "info"), ("x", "dataset", "warning")])
def test_a_loader_a_function_of_another_file_returns_batches_on_the_first_axis(tmp_path, data, returned, expected):
    write(tmp_path, {"models/model.py": MODEL.format(data=data), "utils/data.py": DATA.format(returned=returned),
                     "train.py": TRAIN})
    [finding] = mha001(tmp_path)
    evidence = " | ".join(finding.evidence)
    built = "`DataLoader(dataset, batch_size=batch_size, shuffle=True)` at utils/data.py:4"
    if expected == "error":
        assert finding.severity == Severity.ERROR and "gets batch-first data" in finding.message
        assert built in finding.message.replace("`, ", "` at ") and "default collate stacks" in evidence
    elif expected == "info":
        assert finding.severity == Severity.INFO and "implicitly right for sequence-first data" in finding.message
        assert built in evidence and "x.transpose(0, 1)" in evidence
    else:
        assert_unknown_warning(finding)
        assert "DataLoader" not in evidence


def test_a_collate_function_in_another_file_is_read_there(tmp_path):
    setup, rest = COLLATE.split("    def train(")
    model, data = setup.split("    def get_data(")
    train = "    from data import get_data\n    from model import Model\n\n    def train(" + rest
    write(tmp_path, {"model.py": model, "data.py": "    from torch.utils.data import DataLoader\n"
                     "    from torch.nn.utils.rnn import pad_sequence\n\n    def get_data(" + data.format(
                         padded="pad_sequence(ids)"), "train.py": train})
    [finding] = mha001(tmp_path)
    assert finding.severity == Severity.INFO and "implicitly right for sequence-first data" in finding.message
    evidence = " | ".join(finding.evidence)
    assert "`pad_sequence(ids)` at data.py:" in evidence and "what `collate` returns" in evidence


HANDED_TRAIN = """\
    from torch.utils.data import DataLoader, TensorDataset

    def train_model(model, X, y):
        loader = DataLoader(TensorDataset(X, y), batch_size=32, shuffle=True)
        for xb, yb in loader:
            model(xb)
"""

HANDED_MAIN = """\
    from model import Model
    from train import {imported}

    model = Model().to("cpu")
    train_model({passed}, [], [])
"""


@pytest.mark.parametrize("imported", ["train_model", "*"])
@pytest.mark.parametrize(("data", "passed", "expected"), [
    ("x", "model", Severity.ERROR), ("x.transpose(0, 1)", "model", Severity.INFO), ("x", "None", Severity.WARNING)])
def test_an_instance_handed_to_a_function_of_another_file_runs_where_that_function_calls_it(tmp_path, data, passed,
                                                                                           expected, imported):
    write(tmp_path, {"model.py": MODEL.format(data=data), "train.py": HANDED_TRAIN,
                     "main.py": HANDED_MAIN.format(passed=passed, imported=imported)})
    [finding] = mha001(tmp_path)
    assert finding.severity == expected, finding.message
    evidence = " | ".join(finding.evidence)
    if expected == Severity.WARNING:
        assert_unknown_warning(finding)
    else:
        assert "`DataLoader(TensorDataset(X, y), batch_size=32, shuffle=True)` at train.py:4" in evidence
        assert "`model(xb)` at train.py:6: runs the `Model` that main.py:5 hands to `train_model`" in evidence


STARRED_TRAIN = """\
    from model import Model

    def fit(loader):
        model = Model()
        for x, y in loader:
            model(x.permute({order}))
"""

STARRED_MAIN = """\
    from torch.utils.data import DataLoader
    from train import *

    fit({passed})
"""


@pytest.mark.parametrize(("order", "passed", "expected"), [
    ("1, 0, 2", "DataLoader([], batch_size=8)", Severity.INFO), ("0, 1, 2", "DataLoader([], batch_size=8)",
                                                                 Severity.ERROR),
    ("1, 0, 2", "[]", Severity.WARNING)])
def test_a_loader_parameter_filled_by_a_file_that_star_imports_the_function(tmp_path, order, passed, expected):
    write(tmp_path, {"model.py": MODEL.format(data="x"), "train.py": STARRED_TRAIN.format(order=order),
                     "main.py": STARRED_MAIN.format(passed=passed)})
    [finding] = mha001(tmp_path)
    assert finding.severity == expected, finding.message
    if expected == Severity.WARNING:
        assert_unknown_warning(finding, "an item of `loader`")
    else:
        assert "`DataLoader([], batch_size=8)` at main.py:4" in " | ".join(finding.evidence)
        assert f"`x.permute({order})` at train.py:6" in " | ".join(finding.evidence)
