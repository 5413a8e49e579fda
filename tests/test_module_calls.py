"""Which calls run a module (issue 35 items 1, 2, 6): a construction is paired with the calls that reach it through
a name bound more than once, a stack around a layer that may be one of several classes, a dict's literal key, a
torch module's submodule (`model.transformer.encoder`, `self.encoder` in a subclass of nn.Transformer) and an
attribute a base class sets. Each is checked both ways: batch-first data is an error, sequence-first data info.
"""

from __future__ import annotations

import textwrap

import pytest
from test_mha001_layout import assert_batch_first_error, assert_sequence_first_info, assert_unknown_warning
from test_project import mha001, write

from mhalint.finding import Severity

CODE = "MHA001"
BATCH = "B, T, C = x.shape"
SEQUENCE = "T, B, C = x.shape"


def model(build: str, run: str, unpack: str, header: str = "class Model(nn.Module):", extra: str = "") -> str:
    return "import torch.nn as nn\n" + extra + f"""
{header}
    def __init__(self, d=64, h=8, norm="layer"):
        super().__init__()
{textwrap.indent(textwrap.dedent(build), " " * 8)}
    def forward(self, x):
        {unpack}
{textwrap.indent(textwrap.dedent(run), " " * 8)}
"""


def both_ways(lint, build: str, run: str, lines: list[int], header: str = "class Model(nn.Module):",
              extra: str = "") -> None:
    """Batch-first data: an error at each of `lines`; the sequence-first twin: info at each."""
    errors = lint(model(build, run, BATCH, header, extra), CODE, "info")
    assert [f.line for f in errors] == lines, [(f.line, f.message) for f in errors]
    for finding in errors:
        assert_batch_first_error(finding, BATCH)
    infos = lint(model(build, run, SEQUENCE, header, extra), CODE, "info")
    assert [f.line for f in infos] == lines, [(f.line, f.message) for f in infos]
    for finding in infos:
        assert_sequence_first_info(finding, SEQUENCE)


def test_an_attribute_bound_on_both_branches_pairs_each_construction_with_its_calls(lint):
    build = """\
        if norm == "layer":
            self.attn = nn.MultiheadAttention(d, h)
        else:
            self.attn = nn.MultiheadAttention(d, h, dropout=0.1)
    """
    both_ways(lint, build, "return self.attn(x, x, x)[0]", [7, 9])


def test_a_name_rebound_in_a_loop_pairs_each_stack_with_the_layer_built_before_it(lint):
    """`layer` is bound twice in each round of a loop that appends two stacks: the first stack's calls reach only
    the first layer (batch-first data), the second stack's only the second (sequence-first data)."""
    build = """\
        self.time = nn.ModuleList()
        self.space = nn.ModuleList()
        for _ in range(2):
            layer = nn.TransformerEncoderLayer(d, h)
            self.time.append(nn.TransformerEncoder(layer, 1))
            layer = nn.TransformerEncoderLayer(d, h)
            self.space.append(nn.TransformerEncoder(layer, 1))
    """
    run = "for i in range(2):\n    x = self.time[i](x)\nreturn self.space[0](x.transpose(0, 1))"
    first, second = lint(model(build, run, BATCH), CODE, "info")
    assert (first.line, second.line) == (9, 11)
    assert_batch_first_error(first, BATCH)
    assert_sequence_first_info(second, BATCH, "x.transpose(0, 1)")


def test_a_name_rebound_to_a_second_layer_pairs_each_stack_with_its_own_layer(lint):
    """`layer` is bound twice: each stack is built around the binding that reaches it, so the first layer is read
    through the first stack's calls only."""
    build = """\
        layer = nn.TransformerEncoderLayer(d, h)
        self.first = nn.TransformerEncoder(layer, 2)
        layer = nn.TransformerEncoderLayer(d, h)
        self.second = nn.TransformerEncoder(layer, 2)
    """
    source = model(build, "y = self.first(x)\nreturn self.second(x.transpose(0, 1))", BATCH)
    first, second = lint(source, CODE, "info")
    assert first.line == 6 and second.line == 8
    assert_batch_first_error(first, BATCH)
    assert_sequence_first_info(second, BATCH, "x.transpose(0, 1)")


def test_a_stack_around_a_layer_of_one_of_two_classes_pairs_the_torch_layer_as_a_possibility(lint):
    """`layer = nn.TransformerEncoderLayer(...)` on one branch and a project layer on the other: the stack's calls
    may run the torch layer; batch-first data is at most a warning (the call may run the other class), and
    sequence-first data is info."""
    extra = "class NormLayer(nn.Module):\n    def forward(self, src):\n        return src\n"
    build = """\
        if norm == "layer":
            layer = nn.TransformerEncoderLayer(d, h)
        else:
            layer = NormLayer()
        self.encoder = nn.TransformerEncoder(layer, 2)
    """
    (warning,) = lint(model(build, "return self.encoder(x)", BATCH, extra=extra), CODE, "info")
    assert (warning.line, warning.severity) == (10, Severity.WARNING)
    assert "gets batch-first data" in warning.message and warning.fix is None
    assert "`self.encoder` may hold NormLayer at this call" in " | ".join(warning.evidence)
    (info,) = lint(model(build, "return self.encoder(x)", SEQUENCE, extra=extra), CODE, "info")
    assert_sequence_first_info(info, SEQUENCE)


@pytest.mark.parametrize("build", [
    pytest.param("layers = {}\nlayers['enc'] = nn.TransformerEncoderLayer(d, h)\nlayers['proj'] = nn.Linear(d, d)\n"
                 "self.layers = nn.ModuleDict(layers)", id="stored-by-key"),
    pytest.param("self.layers = nn.ModuleDict({'enc': nn.TransformerEncoderLayer(d, h), 'proj': nn.Linear(d, d)})",
                 id="literal"),
    pytest.param("self.layers = nn.ModuleDict({'proj': nn.Linear(d, d)})\n"
                 "self.layers['enc'] = nn.TransformerEncoderLayer(d, h)", id="added-after"),
    pytest.param("self.layers = nn.ModuleDict(dict(proj=nn.Linear(d, d), enc=nn.TransformerEncoderLayer(d, h)))",
                 id="dict-keywords"),
])
def test_a_module_dict_of_several_classes_is_read_by_its_literal_key(lint, build):
    line = 6 if "'enc': nn" in build or "enc=" in build else 7
    both_ways(lint, build, "return self.layers['proj'](self.layers['enc'](x))", [line])


def test_a_module_dict_with_a_computed_key_pairs_nothing_by_key(lint):
    build = "self.layers = nn.ModuleDict()\nfor name in ('enc', 'proj'):\n" \
            "    self.layers[name] = nn.TransformerEncoderLayer(d, h) if name == 'enc' else nn.Linear(d, d)"
    (finding,) = lint(model(build, "return self.layers['enc'](x)", BATCH), CODE, "info")
    assert_unknown_warning(finding, "no call of it is found")


@pytest.mark.parametrize("run", [
    pytest.param("memory = self.transformer.encoder(x)\nreturn self.transformer.decoder(x, memory)", id="instance"),
    pytest.param("layer = self.transformer\nreturn layer.encoder(x)", id="local-name"),
])
def test_a_transformers_encoder_and_decoder_run_with_its_batch_first(lint, run):
    both_ways(lint, "self.transformer = nn.Transformer(d, h)", run, [6])


def test_a_transformers_custom_encoder_is_not_its_own(lint):
    """`custom_encoder=` replaces the transformer's encoder: a call of `.encoder` runs the custom one, whose own
    construction is decided, and not the transformer."""
    build = "enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, h), 2)\n" \
            "self.transformer = nn.Transformer(d, h, custom_encoder=enc)"
    found = lint(model(build, "return self.transformer.encoder(x)", BATCH), CODE, "info")
    assert [(f.line, f.severity) for f in found] == [(6, Severity.ERROR), (7, Severity.WARNING)]
    assert_batch_first_error(found[0], BATCH)


def test_a_transformers_encoder_is_its_own_only_where_no_custom_encoder_was_given(lint):
    """`custom_encoder=enc` where `enc` may be None: a call of `.encoder` may run the transformer's own encoder,
    or the custom one; batch-first data is at most a warning (no fix), sequence-first data info."""
    build = "enc = None\nif norm == 'deep':\n    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(d, h, batch_first=True), 2)\n" \
            "self.transformer = nn.Transformer(d, h, custom_encoder=enc)"
    run = "return self.transformer.encoder(x)"
    (warning,) = lint(model(build, run, BATCH), CODE, "info")
    assert (warning.line, warning.severity, warning.fix) == (9, Severity.WARNING, None)
    assert "gets batch-first data" in warning.message
    assert "`self.transformer.encoder` may hold its custom_encoder at this call" in " | ".join(warning.evidence)
    (info,) = lint(model(build, run, SEQUENCE), CODE, "info")
    assert info.line == 9
    assert_sequence_first_info(info, SEQUENCE)


def test_a_subclass_of_transformer_runs_its_inherited_encoder(lint):
    """`class M(nn.Transformer)` whose forward calls `self.encoder(...)`: the encoder torch built with the class's
    `super().__init__` arguments; an attribute the class sets itself (`self.decoder = nn.Linear`) is its own."""
    build = "self.decoder = nn.Linear(d, d)"
    both_ways(lint, build, "return self.decoder(self.encoder(x))", [5], header="class Model(nn.Transformer):")


def test_a_layers_attention_called_on_an_instance_is_the_layers(lint):
    both_ways(lint, "self.layer = nn.TransformerEncoderLayer(d, h)", "return self.layer.self_attn(x, x, x)[0]", [6])


def test_an_attribute_a_base_class_sets_is_read_in_the_subclass(lint):
    """`self.attn` set in the base's `__init__`, called in the subclass's forward."""
    extra = "class Base(nn.Module):\n    def __init__(self, d=64, h=8):\n        super().__init__()\n" \
            "        self.attn = nn.MultiheadAttention(d, h)\n"
    for unpack, check in ((BATCH, assert_batch_first_error), (SEQUENCE, assert_sequence_first_info)):
        source = extra + f"class Model(Base):\n    def forward(self, x):\n        {unpack}\n" \
                         "        return self.attn(x, x, x)[0]\n"
        (finding,) = lint("import torch.nn as nn\n" + source, CODE, "info")
        assert finding.line == 5
        check(finding, unpack)


# ---- no call found: the warning says where the module goes -----------------------------------------------------
NEVER_CALLED = """\
    import torch.nn as nn

    class Block(nn.Module):
        def __init__(self, d=64, h=8, memory=False):
            super().__init__()
            self.extra_attn = nn.MultiheadAttention(d, h) if memory else None
            self.proj = nn.Linear(d, d)

        def forward(self, x):
            if self.extra_attn is not None:
                print(sum(p.numel() for p in self.extra_attn.parameters()))
            return self.proj(x)
"""


def test_a_module_no_file_of_the_project_calls_is_never_called_in_the_project(tmp_path):
    """Proven never run (tests/test_never_run.py): it mixes no samples, an info."""
    write(tmp_path, {"pyproject.toml": "", "block.py": NEVER_CALLED, "train.py": "from block import Block\n"})
    (finding,) = mha001(tmp_path)
    assert finding.severity == Severity.INFO
    assert finding.message.endswith("`self.extra_attn` is never called in the project; called, it would read (L, N, E)")
    assert "`self.extra_attn` is only built and inspected: nothing in the project calls it" in finding.evidence


def test_a_module_another_file_may_call_is_never_called_in_this_file_only(tmp_path):
    """Another file names the attribute: it may call it there (`block.extra_attn(x, x, x)`), so the warning
    claims only this file."""
    write(tmp_path, {"pyproject.toml": "", "block.py": NEVER_CALLED,
                     "train.py": "from block import Block\nblock = Block(memory=True)\ny = block.extra_attn(1, 2, 3)\n"})
    (finding,) = mha001(tmp_path)
    assert_unknown_warning(finding, "`self.extra_attn` is never called in this file")


@pytest.mark.parametrize(("run", "missing"), [
    pytest.param("return helper(self.attn, x)", "`self.attn` is passed to `helper` (line 10)", id="passed"),
    pytest.param("return self.attn.forward(x, x, x)[0]", "`self.attn` is used as `self.attn.forward(x, x, x)`",
                 id="method"),
])
def test_a_module_handed_to_code_not_followed_says_where_it_goes(lint, run, missing):
    source = model("self.attn = nn.MultiheadAttention(d, h)", run, BATCH, extra="from elsewhere import helper\n")
    (finding,) = lint(source, CODE, "info")
    assert_unknown_warning(finding, missing)


def test_a_layer_handed_to_a_call_not_followed_names_the_call(lint):
    source = "from elsewhere import Model\nimport torch.nn as nn\n" \
             "model = Model(\n    custom_encoder=nn.TransformerEncoderLayer(64, 8),\n)\n"
    (finding,) = lint(source, CODE, "info")
    assert_unknown_warning(finding, "it goes to `Model(custom_encoder=...)` (line 3), not followed")


def test_a_transformer_whose_encoder_may_be_a_custom_one_says_so(lint):
    source = """\
        import torch.nn as nn
        from elsewhere import make_encoder
        def build():
            model = nn.Transformer(64, 8, custom_encoder=make_encoder())
            return model.encoder
    """
    (finding,) = lint(source, CODE, "info")
    assert_unknown_warning(finding, "`model` gives its `.encoder` away (line 5)")
    (finding,) = lint(source.replace("model.encoder", "model.encoder(x)").replace("build()", "build(x)"), CODE, "info")
    assert_unknown_warning(finding, "`model` calls an `.encoder` that may be its `custom_encoder` (line 5)")


def test_a_functions_returned_values_are_read_once_and_leave_out_nested_functions():
    """`calls.returned` walks a function's body once and keeps the answer on its scope: the analyses ask it of the
    same function at every call they follow into it."""
    from mhalint.analysis.calls import returned
    from mhalint.context import ModuleContext
    from mhalint.parse.lazy import cst

    source = "def build(x):\n    def inner():\n        return 0\n    if x:\n        return x + 1\n    return\n"
    ctx = ModuleContext(cst.parse_module(source), "snippet.py", source)
    function = ctx.functions["build"]
    values = returned(function)
    assert [ctx.code(value) for value in values] == ["x + 1"]
    assert returned(function) is values
