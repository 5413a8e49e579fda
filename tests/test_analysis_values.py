"""Configuration values and parameters from every call site (mhalint/analysis/values.py, configs.py, options.py,
sites.py): a setting decided by a config field is an error naming the field and its line; the correct twin is
silent; several values reaching (a default that one construction overrides, a command-line flag) are reported
per instance, never as the default's error; anything unread stays unknown (no finding)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mhalint.finding import Finding, Severity
from mhalint.rule import load_rules
from mhalint.run.engine import Checker

MODEL = """\
    class Model(nn.Module):
        def __init__(self, cfg{annotation}):
            super().__init__()
            self.attn = nn.MultiheadAttention(64, 8, batch_first={read})

        def forward(self, x):
            B, T, C = x.shape
            return self.attn(x, x, x)[0]
"""


def mha001(lint, config: str, read: str = "cfg.batch_first", annotation: str = "", after: str = "") -> list[Finding]:
    source = textwrap.dedent(config) + textwrap.dedent(MODEL.format(annotation=annotation, read=read)) + \
        textwrap.dedent(after)
    found = lint("import torch.nn as nn\n" + source, "MHA001", min_severity="info")
    assert all(f.code == "MHA001" for f in found), found
    return found


DATACLASS = """\
    from dataclasses import dataclass, field
    @dataclass
    class ModelConfig:
        dim: int = 64
        batch_first: bool = {default}
"""


@pytest.mark.parametrize("default", ["False", "field(default=False)"])
def test_a_dataclass_default_that_the_constructions_leave_decides_the_site(lint, default):
    [finding] = mha001(lint, DATACLASS.format(default=default), annotation=": ModelConfig",
                       after="def main():\n    return ModelConfig(dim=32)\n")
    assert finding.severity is Severity.ERROR and "batch_first=cfg.batch_first is False" in finding.message
    assert "`ModelConfig(...)` at line 16 leaves `batch_first` at its default" in finding.evidence
    assert "`ModelConfig.batch_first` defaults to False at line 6" in finding.evidence


def test_a_config_class_the_project_never_builds_is_built_elsewhere_so_its_defaults_decide_nothing(lint):
    assert mha001(lint, DATACLASS.format(default="False"), annotation=": ModelConfig") == []
    assert mha001(lint, DATACLASS.format(default="False"), annotation=": ModelConfig",
                  after="def load(d):\n    return ModelConfig.from_dict(d)\nModelConfig(dim=32)\n") == []


def test_a_dataclass_instance_that_sets_the_field_is_followed_through_the_call(lint):
    assert mha001(lint, DATACLASS.format(default="False"), after="model = Model(ModelConfig(batch_first=True))\n") == []
    [finding] = mha001(lint, DATACLASS.format(default="True"),
                       after="cfg = ModelConfig(64, False)\nmodel = Model(cfg)\n")
    assert finding.severity is Severity.ERROR
    assert "`cfg` is what the call at line 16 passes" in finding.evidence
    assert "`ModelConfig(...)` at line 15 passes batch_first=False" in finding.evidence


def test_constructions_that_disagree_are_decided_per_instance_not_by_the_default(lint):
    found = mha001(lint, DATACLASS.format(default="False"),
                   after="a = Model(ModelConfig(batch_first=True))\nb = Model(ModelConfig())\n")
    [finding] = found
    assert "False in the instance at line 16" in finding.message and finding.fix is None
    assert "`ModelConfig(...)` at line 16 leaves `batch_first` at its default" in finding.evidence


def test_the_typed_class_is_built_elsewhere_with_the_right_value(lint):
    assert mha001(lint, DATACLASS.format(default="False"), annotation=": ModelConfig",
                  after="def main():\n    return ModelConfig(batch_first=True)\n") == []


def test_a_class_handed_over_as_a_value_may_be_built_anywhere_so_its_default_decides_nothing(lint):
    assert mha001(lint, DATACLASS.format(default="False"), annotation=": ModelConfig",
                  after="cfg = OmegaConf.structured(ModelConfig)\n") == []


@pytest.mark.parametrize("config", [
    "from typing import NamedTuple\nclass ModelConfig(NamedTuple):\n    dim: int = 64\n    batch_first: bool = {}\n",
    "import attr\n@attr.s\nclass ModelConfig:\n    dim = attr.ib(default=64)\n    batch_first = attr.ib({})\n",
    "from attrs import define, field\n@define\nclass ModelConfig:\n    batch_first: bool = field(default={})\n",
    "from pydantic import BaseModel, Field\nclass ModelConfig(BaseModel):\n    batch_first: bool = Field({})\n",
    "class ModelConfig:\n    batch_first = {}\n",
    "class ModelConfig:\n    def __init__(self, batch_first={}):\n        self.batch_first = batch_first\n",
])
def test_every_kind_of_config_class(lint, config):
    [finding] = mha001(lint, config.format("False"), after="model = Model(ModelConfig())\n")
    assert finding.severity is Severity.ERROR, finding
    assert mha001(lint, config.format("True"), after="model = Model(ModelConfig())\n") == []


def test_a_config_class_itself_passed_as_the_default(lint):
    [finding] = mha001(lint, "class Cfg:\n    batch_first = False\n", annotation="=Cfg")
    assert "`Cfg.batch_first` = False at line 3" in finding.evidence
    assert mha001(lint, "class Cfg:\n    batch_first = True\n", annotation="=Cfg") == []


@pytest.mark.parametrize("read", ['cfg["batch_first"]', 'cfg.get("batch_first", True)'])
def test_dict_literals(lint, read):
    [finding] = mha001(lint, 'CFG = {"batch_first": False}\n', read=read, annotation="=CFG")
    assert "`batch_first` is False in the dict at line 2" in finding.evidence
    assert mha001(lint, 'CFG = dict(batch_first=True)\n', read=read, annotation="=CFG") == []


def test_getattr_gives_its_default_only_where_the_object_has_no_such_field(lint):
    config = "class Cfg:\n    dim = 64\n"
    [finding] = mha001(lint, config, read='getattr(cfg, "batch_first", False)', annotation="=Cfg")
    assert "`cfg` has no `batch_first`" in " ".join(finding.evidence)
    assert mha001(lint, "class Cfg:\n    batch_first = True\n", read='getattr(cfg, "batch_first", False)',
                  annotation="=Cfg") == []
    # an object mhalint cannot read: the default is not assumed
    assert mha001(lint, "", read='getattr(cfg, "batch_first", False)') == []


def test_a_config_changed_after_it_is_built_is_unknown(lint):
    assert mha001(lint, DATACLASS.format(default="False"),
                  after="cfg = ModelConfig()\ncfg.batch_first = True\nmodel = Model(cfg)\n") == []
    assert mha001(lint, DATACLASS.format(default="False"),
                  after="cfg = ModelConfig()\ncfg.merge_from_file('x.yaml')\nmodel = Model(cfg)\n") == []


ARGPARSE = """\
    import argparse
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-first", {option})
    args = parser.parse_args()
"""


def test_a_store_true_flag_is_one_value_per_run(lint):
    [finding] = mha001(lint, ARGPARSE.format(option='action="store_true"'), after="model = Model(args)\n")
    assert "is False in a run without --batch-first" in finding.message and finding.fix is None
    assert mha001(lint, ARGPARSE.format(option='action="store_false"'), after="model = Model(args)\n") != []
    assert mha001(lint, ARGPARSE.format(option='action="store_true", default=True'),
                  after="model = Model(args)\n") == []


def test_an_option_default(lint):
    [finding] = mha001(lint, ARGPARSE.format(option="type=bool, default=False"), after="model = Model(args)\n")
    assert any("`--batch-first` defaults to False at line 4 (unless the command line sets it)" in e
               for e in finding.evidence), finding.evidence
    assert mha001(lint, ARGPARSE.format(option="type=bool, default=True"), after="model = Model(args)\n") == []


# ---- other files of the run ---------------------------------------------------------------------------------------
def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).write_text(textwrap.dedent(text))


def run(root: Path, code: str) -> list[Finding]:
    rules = [load_rules()[code]]
    return [f for f in Checker(rules).check_paths([root], jobs=1).findings if f.code == code]


def test_a_config_built_in_another_file_decides_the_site(tmp_path):
    write(tmp_path, {"config.py": DATACLASS.format(default="False"),
                     "model.py": "import torch.nn as nn\nfrom config import ModelConfig\n"
                                 + textwrap.dedent(MODEL.format(annotation=": ModelConfig", read="cfg.batch_first")),
                     "train.py": "from config import ModelConfig\ncfg = ModelConfig(batch_first=True)\n"})
    assert run(tmp_path, "MHA001") == []
    write(tmp_path, {"train.py": "from config import ModelConfig\ncfg = ModelConfig()\n"})
    [finding] = run(tmp_path, "MHA001")
    assert finding.severity is Severity.ERROR, finding
    assert "`ModelConfig.batch_first` defaults to False at config.py:5" in " ".join(finding.evidence), finding.evidence


ATTENTION = """\
    import torch.nn as nn
    import torch.nn.functional as F

    class Attention(nn.Module):
        def __init__(self, dropout=0.0):
            super().__init__()
            self.dropout = dropout

        def forward(self, q, k, v):
            return F.scaled_dot_product_attention(q, k, v, dropout_p=self.dropout)
"""


@pytest.mark.parametrize(("passed", "expected"), [
    ("0.1", [Severity.ERROR]), ("0.0", []), ("", []), ("p", [Severity.WARNING])])
def test_a_dropout_whose_default_is_zero_but_a_caller_in_another_file_passes_more(tmp_path, passed, expected):
    write(tmp_path, {"attention.py": ATTENTION,
                     "model.py": f"from attention import Attention\ndef build(p):\n    return Attention({passed})\n"})
    found = run(tmp_path, "MHA011")
    assert [f.severity for f in found] == expected, found
    if found and passed == "0.1":
        assert "model.py:3 passes dropout=0.1" in " ".join(found[0].evidence)


def test_a_flag_whose_true_comes_two_calls_up(lint):
    source = """\
        import torch.nn as nn
        attn = nn.MultiheadAttention(64, 8, batch_first=True)
        def attend(x, causal):
            return attn(x, x, x, is_causal=causal)[0]
        def run(x, causal):
            return attend(x, causal=causal)
        def encode(x):
            return run(x, {encoding})
        def decode(x):
            return run(x, {decoding})
    """
    [finding] = lint(source.format(encoding="False", decoding="True"), "MHA003")
    assert finding.severity is Severity.ERROR
    assert "line 10 passes causal=True" in " ".join(finding.evidence), finding.evidence
    assert lint(source.format(encoding="False", decoding="False"), "MHA003") == []


# ---- **kwargs forwarding and functools.partial of project classes ----------------------------------------------
FORWARDING = textwrap.dedent("""\
    import torch.nn as nn
    class Block(nn.Module):
        def __init__(self, dim, heads, **kw):
            super().__init__()
            self.attn = nn.MultiheadAttention(dim, heads, **kw)
        def forward(self, x):
            B, T, C = x.shape
            return self.attn(x, x, x)[0]
""")


def test_keywords_forwarded_through_kwargs_come_from_the_callers(lint):
    assert lint(FORWARDING + "block = Block(64, 8, batch_first=True)\n", "MHA001") == []
    [finding] = lint(FORWARDING + "block = Block(64, 8, dropout=0.1)\n", "MHA001")
    assert finding.severity is Severity.ERROR and "batch_first is False (passed through **)" in finding.message
    assert "`Block(...)` at line 9 passes no batch_first through **kw" in finding.evidence
    assert finding.fix is None  # a keyword beside **kw could be given twice


def test_callers_that_disagree_through_kwargs_are_decided_per_instance(lint):
    [finding] = lint(FORWARDING + "a = Block(64, 8, batch_first=True)\nb = Block(64, 8)\n", "MHA001")
    assert "batch_first is False in the instance at line 10" in finding.message, finding.message


def test_kwargs_nobody_fills_and_a_caller_that_spreads_its_own_stay_unknown(lint):
    assert lint(FORWARDING, "MHA001") == []
    assert lint(FORWARDING + "def make(**options):\n    return Block(64, 8, **options)\n", "MHA001") == []


def test_a_dict_spread_into_the_constructor(lint):
    source = "import torch.nn as nn\nCFG = dict(batch_first={})\nattn = nn.MultiheadAttention(64, 8, **CFG)\n" \
             "def f(x):\n    B, T, C = x.shape\n    return attn(x, x, x)\n"
    [finding] = lint(source.format("False"), "MHA001")
    assert "`batch_first` is False in the dict at line 2" in finding.evidence
    assert lint(source.format("True"), "MHA001") == []


PARTIAL = """\
    import functools
    import torch.nn as nn
    class Block(nn.Module):
        def __init__(self, dim, heads, batch_first=False):
            super().__init__()
            self.attn = nn.MultiheadAttention(dim, heads, batch_first=batch_first)
        def forward(self, x):
            B, T, C = x.shape
            return self.attn(x, x, x)[0]
    Wide = functools.partial(Block, batch_first={})
    block = Wide(64, 8)
"""


def test_a_partial_of_a_project_class_passes_its_keywords(lint):
    assert lint(PARTIAL.format("True"), "MHA001") == []
    [finding] = lint(PARTIAL.format("False"), "MHA001")
    assert "`Wide(...)` at line 11 passes batch_first=False" in finding.evidence


# ---- a value returned in a tuple --------------------------------------------------------------------------------
def test_a_mask_returned_in_a_tuple_keeps_its_construction(lint):
    source = """\
        import torch
        import torch.nn as nn
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.attn = nn.MultiheadAttention(64, 8, batch_first=True)
            def get_mask(self, x, lengths):
                keep = torch.arange(x.shape[1])[None, :] {op} lengths[:, None]
                return keep, x
            def forward(self, x, lengths):
                mask, x = self.get_mask(x, lengths)
                return self.attn(x, x, x, key_padding_mask=mask, need_weights=False)[0]
    """
    [finding] = lint(source.format(op="<"), "MHA002")
    assert finding.severity is Severity.ERROR
    assert finding.evidence[0] == "`mask, x = self.get_mask(x, lengths)` at line 11 (`mask` is `keep` there)"
    assert lint(source.format(op=">="), "MHA002") == []


def test_sizes_unpacked_from_a_helper(lint):
    source = """\
        import torch.nn as nn
        def sizes():
            return 64, {heads}
        dim, heads = sizes()
        attn = nn.MultiheadAttention(dim, heads, batch_first=True)
    """
    [finding] = lint(source.format(heads=5), "MHA004")
    assert "gives `heads` 5" in " ".join(finding.evidence), finding.evidence
    assert lint(source.format(heads=8), "MHA004") == []


BATCH = """\
    import torch
    import torch.nn as nn
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(64, 8, batch_first=True), 2)
        def forward(self, tokens, lengths):
            keep = torch.arange(tokens.shape[1])[None, :] < lengths[:, None]
            batch = {{"tokens": tokens, "mask": {mask}}}
            return self.encoder(tokens, src_key_padding_mask=batch["mask"])
"""


def test_a_mask_read_from_a_dict_entry(lint):
    [finding] = lint(BATCH.format(mask="keep"), "MHA002")
    assert finding.evidence[0] == '`batch["mask"]` is `keep`, set at line 9', finding.evidence
    assert lint(BATCH.format(mask="~keep"), "MHA002") == []


@pytest.mark.parametrize(("compared", "flagged"), [("== 1", True), ("== 0", False)])
def test_a_tokenizer_mask_read_from_a_batch_by_its_key(lint, compared, flagged):
    source = ("import torch.nn as nn\nlayer = nn.TransformerEncoderLayer(64, 8, batch_first=True)\n"
              f"def forward(batch):\n    return layer(batch['x'], src_key_padding_mask=batch['attention_mask'] {compared})\n")
    found = lint(source, "MHA002")
    assert len(found) == (1 if flagged else 0), found
    if flagged:
        assert "`attention_mask` is a tokenizer's mask by its name, 1 at real tokens" in found[0].evidence[0]


def test_the_files_that_import_a_class_are_parsed_once_however_many_questions_reach_them(tmp_path, monkeypatch):
    import mhalint.analysis.project as project

    parsed: list[str] = []
    parse = project._parse
    monkeypatch.setattr(project, "_parse", lambda path, *rest, **options: parsed.append(path) or
                        parse(path, *rest, **options))
    write(tmp_path, {"model.py": """\
        import torch.nn as nn
        class Encoder(nn.Module):
            def __init__(self, dim, heads, dropout=0.0):
                super().__init__()
                self.first = nn.MultiheadAttention(dim, heads, dropout=dropout)
                self.second = nn.MultiheadAttention(dim, heads, dropout=dropout)
            def forward(self, src, memory):
                x = self.first(src, src, src)[0]
                return self.second(x, memory, memory)[0]
    """})
    for number in range(7):
        write(tmp_path, {f"use{number}.py": "from model import Encoder\n"
                                            "def run(a, b):\n    return Encoder(64, 8, 0.1)(a, b)\n"})
    run(tmp_path, "MHA001")
    assert parsed and max(parsed.count(path) for path in parsed) == 1, sorted(parsed)


def test_a_flag_set_on_the_command_line_is_set_in_the_runs_that_give_it(lint):
    source = """\
        import argparse
        import torch.nn.functional as F
        parser = argparse.ArgumentParser()
        parser.add_argument("--causal", {option})
        args = parser.parse_args()
        def attend(q, k, v, mask):
            return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=args.causal)
    """
    [finding] = lint(source.format(option='action="store_true"'), "MHA009")
    assert "it is False in a run without --causal" in finding.evidence, finding.evidence
    assert lint(source.format(option="type=bool, default=False"), "MHA009") == []


@pytest.mark.parametrize("written, value", [("float('-1e-9')", -1e-9), ("-float('inf')", float("-inf")),
                                            ("float(2)", 2.0), ("float('not a number')", None),
                                            ("float(x)", None)])
def test_float_of_a_literal_is_read_and_anything_else_is_not(written, value):
    from mhalint.analysis.values import resolve
    from mhalint.context import ModuleContext
    from mhalint.parse.lazy import cst

    source = f"def f(x):\n    y = {written}\n"
    ctx = ModuleContext(cst.parse_module(source), "snippet.py", source)
    [binding] = ctx.bindings("y", ctx.scope_of(ctx.module.body[0]))
    found = resolve(ctx, binding.value, binding.scope)
    assert (found.value if found is not None else None) == value
