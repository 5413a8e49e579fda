"""Layer stacks (issue 35 item 1): a module built inside a container is paired with the calls made through the
container, and the data's axis roles flow into the loop over the layers and out of it.

Each way of building a stack and each way of calling through it is checked both ways: batch-first data (a shape
unpacking before the loop) into layers built without batch_first is an error that names the unpacking; the
sequence-first twin is info; data whose layout nothing shows stays a warning.
"""

from __future__ import annotations

import textwrap

import pytest
from test_mha001_layout import assert_batch_first_error, assert_sequence_first_info, assert_unknown_warning

from mhalint.analysis import calls
from mhalint.context import ModuleContext
from mhalint.parse.lazy import cst

CODE = "MHA001"
LAYER = "nn.TransformerEncoderLayer(d, h)"
ATTENTION = "nn.MultiheadAttention(d, h)"


def model(build: str, run: str, unpack: str = "B, T, C = x.shape", helpers: str = "") -> str:
    """A model whose __init__ runs `build` and whose forward unpacks its input's shape, then runs `run`."""
    return "import copy\nfrom collections import OrderedDict\nimport torch.nn as nn\n" + helpers + f"""
class Model(nn.Module):
    def __init__(self, d=64, h=8, n=4):
        super().__init__()
{textwrap.indent(textwrap.dedent(build), " " * 8)}
    def forward(self, x):
        {unpack}
{textwrap.indent(textwrap.dedent(run), " " * 8)}
"""


LOOP = "for layer in self.layers:\n    x = layer(x)\nreturn x"
CLONES = "def _get_clones(module, N):\n    return nn.ModuleList([copy.deepcopy(module) for i in range(N)])\n"

BUILT = {
    "modulelist-comprehension": (f"self.layers = nn.ModuleList([{LAYER} for _ in range(n)])", ""),
    "modulelist-generator": (f"self.layers = nn.ModuleList({LAYER} for _ in range(n))", ""),
    "list-literal": (f"self.layers = [{LAYER}, {LAYER}]", ""),
    "append-in-loop": (f"self.layers = nn.ModuleList()\nfor _ in range(n):\n    self.layers.append({LAYER})", ""),
    "extend": (f"self.layers = nn.ModuleList()\nself.layers.extend([{LAYER} for _ in range(n)])", ""),
    "insert": (f"self.layers = nn.ModuleList()\nfor i in range(n):\n    self.layers.insert(i, {LAYER})", ""),
    "augmented": (f"self.layers = nn.ModuleList()\nfor _ in range(n):\n    self.layers += [{LAYER}]", ""),
    "local-list-appended": (f"layers = []\nfor _ in range(n):\n    layers.append({LAYER})\n"
                            "self.layers = nn.ModuleList(layers)", ""),
    "plus": (f"self.layers = nn.ModuleList([{LAYER}] + [{LAYER} for _ in range(n)])", ""),
    "times": (f"layer = {LAYER}\nself.layers = nn.ModuleList(n * [layer])", ""),
    "deepcopy": (f"layer = {LAYER}\nself.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(n)])", ""),
    "clone-helper": (f"self.layers = _get_clones({LAYER}, n)", CLONES),
    "moved": (f"self.layers = nn.ModuleList([{LAYER} for _ in range(n)])\nself.layers = self.layers.to('cpu')", ""),
    "moduledict": (f"self.layers = nn.ModuleDict({{'a': {LAYER}, 'b': {LAYER}}})", ""),
    "stored-by-key": (f"self.layers = nn.ModuleDict()\nfor name in ('a', 'b'):\n    self.layers[name] = {LAYER}", ""),
}


@pytest.mark.parametrize("build,helpers", BUILT.values(), ids=BUILT.keys())
def test_every_layer_of_a_stack_fed_batch_first_data_is_an_error(lint, build, helpers):
    run = LOOP.replace("self.layers:", "self.layers.values():") if "ModuleDict" in build else LOOP
    found = lint(model(build, run, helpers=helpers), CODE, "info")
    assert found, "no finding"
    for finding in found:  # a literal of two layers: both are reported
        assert_batch_first_error(finding, "B, T, C = x.shape")


@pytest.mark.parametrize("build,helpers", BUILT.values(), ids=BUILT.keys())
def test_every_layer_of_a_stack_fed_sequence_first_data_is_info(lint, build, helpers):
    run = LOOP.replace("self.layers:", "self.layers.values():") if "ModuleDict" in build else LOOP
    found = lint(model(build, run, unpack="T, B, C = x.shape", helpers=helpers), CODE, "info")
    assert found, "no finding"
    for finding in found:
        assert_sequence_first_info(finding, "T, B, C = x.shape")


CALLED = {
    "for": LOOP,
    "enumerate": "for i, layer in enumerate(self.layers):\n    x = layer(x)\nreturn x",
    "zip": "for layer, norm in zip(self.layers, self.norms):\n    x = norm(layer(x))\nreturn x",
    "reversed": "for layer in reversed(self.layers):\n    x = layer(x)\nreturn x",
    "index": "for i in range(len(self.layers)):\n    x = self.layers[i](x)\nreturn x",
    "last": "return self.layers[-1](x)",
    "slice": "for layer in self.layers[:2]:\n    x = layer(x)\nreturn x",
    "local-alias": "layers = self.layers\nfor layer in layers:\n    x = layer(x)\nreturn x",
}
STACK = f"self.layers = nn.ModuleList([{LAYER} for _ in range(n)])\n" \
        "self.norms = nn.ModuleList([nn.LayerNorm(d) for _ in range(n)])"


@pytest.mark.parametrize("run", CALLED.values(), ids=CALLED.keys())
def test_calls_through_a_stack_carry_the_layout(lint, run):
    (error,) = lint(model(STACK, run), CODE, "info")
    assert_batch_first_error(error, "B, T, C = x.shape")
    (info,) = lint(model(STACK, run, unpack="T, B, C = x.shape"), CODE, "info")
    assert_sequence_first_info(info, "T, B, C = x.shape")


@pytest.mark.parametrize("run", [
    pytest.param("for name, layer in self.layers.items():\n    x = layer(x)\nreturn x", id="items"),
    pytest.param("return self.layers['a'](x)", id="key"),
])
def test_calls_through_a_module_dict(lint, run):
    build = f"self.layers = nn.ModuleDict(OrderedDict([('a', {LAYER}), ('b', {LAYER})]))"
    found = lint(model(build, run), CODE, "info")
    assert found
    for finding in found:
        assert_batch_first_error(finding, "B, T, C = x.shape")


@pytest.mark.parametrize("run", [
    pytest.param("for layer in self.layers:\n    x = layer(x, x, x)[0]\nreturn x", id="indexed"),
    pytest.param("for layer in self.layers:\n    x, _ = layer(x, x, x)\nreturn x", id="unpacked"),
    pytest.param("for layer in self.layers:\n    out, weights = layer(x, x, x)\n    x = x + out\nreturn x",
                 id="residual"),
])
def test_a_stack_of_attention_modules_passes_the_query_layout_on(lint, run):
    build = f"self.layers = nn.ModuleList([{ATTENTION} for _ in range(n)])"
    (error,) = lint(model(build, run), CODE, "info")
    assert_batch_first_error(error, "B, T, C = x.shape")
    assert error.message.startswith("nn.MultiheadAttention")
    (info,) = lint(model(build, run, unpack="T, B, C = x.shape"), CODE, "info")
    assert_sequence_first_info(info, "T, B, C = x.shape")


def test_the_layout_a_stack_keeps_reaches_the_module_after_the_loop(lint):
    build = f"self.layers = nn.ModuleList([{LAYER} for _ in range(n)])\nself.head = {ATTENTION}"
    run = "for layer in self.layers:\n    x = layer(x)\nreturn self.head(x, x, x)[0]"
    found = lint(model(build, run), CODE, "info")
    assert [f.line for f in found] == [8, 9]
    for finding in found:
        assert_batch_first_error(finding, "B, T, C = x.shape")


def test_a_stack_whose_data_nothing_shows_stays_a_warning(lint):
    (finding,) = lint(model(f"self.layers = nn.ModuleList([{LAYER} for _ in range(n)])", LOOP, unpack="pass"),
                      CODE, "info")
    assert_unknown_warning(finding, missing="the data, `x`, is a parameter of `forward`")


@pytest.mark.parametrize("build", [
    pytest.param(f"self.layers = nn.Sequential({LAYER}, {LAYER})", id="sequential"),
    pytest.param(f"self.layers = nn.Sequential(nn.Linear(d, d), nn.LayerNorm(d), {LAYER})", id="after-norms"),
    pytest.param(f"self.layers = nn.Sequential(OrderedDict([('proj', nn.Linear(d, d)), ('enc', {LAYER})]))",
                 id="ordered-dict"),
    pytest.param(f"self.layers = nn.Sequential(*[{LAYER} for _ in range(n)])", id="starred"),
])
def test_calling_a_sequential_feeds_each_layer_the_one_before(lint, build):
    found = lint(model(build, "return self.layers(x)"), CODE, "info")
    assert found
    for finding in found:
        assert_batch_first_error(finding, "B, T, C = x.shape")
    for finding in lint(model(build, "return self.layers(x)", unpack="T, B, C = x.shape"), CODE, "info"):
        assert_sequence_first_info(finding, "T, B, C = x.shape")


def test_a_sequential_layer_after_one_that_moves_axes_is_not_fed_the_input(lint):
    """A module that is not known to keep the axes (a convolution) stands between the input and the layer: the
    input's layout says nothing about what the layer gets."""
    build = f"self.layers = nn.Sequential(nn.Conv1d(d, d, 3), {LAYER})"
    (finding,) = lint(model(build, "return self.layers(x)"), CODE, "info")
    assert_unknown_warning(finding)


BLOCKS = """\
import torch.nn as nn

class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, h)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return x + self.attn(self.norm(x), x, x)[0]

class Model(nn.Module):
    def __init__(self, d=64, h=8, n=4):
        super().__init__()
        self.blocks = nn.ModuleList([Block(d, h) for _ in range(n)])

    def forward(self, x):
        {unpack}
        for block in self.blocks:
            x = block(x)
        return x
"""


def _each_layout(lint, template: str) -> None:
    """The stack's input unpacked batch first (an error), sequence first (info) or not at all (a warning)."""
    (error,) = lint(template.format(unpack="B, T, C = x.shape"), CODE, "info")
    assert_batch_first_error(error, "B, T, C = x.shape")
    (info,) = lint(template.format(unpack="T, B, C = x.shape"), CODE, "info")
    assert_sequence_first_info(info, "T, B, C = x.shape")
    (unknown,) = lint(template.format(unpack="pass"), CODE, "info")
    assert_unknown_warning(unknown)


def test_a_stack_of_project_blocks_is_followed_into_their_forward(lint):
    _each_layout(lint, BLOCKS)


def _module_calls(source: str) -> dict[int, list[int]]:
    """The line of each attention module's construction -> the lines of the calls that run it."""
    source = textwrap.dedent(source)
    ctx = ModuleContext(cst.parse_module(source), "snippet.py", source)
    found = {}
    for call, scope in ctx.calls():
        built = calls.construction(ctx, call, scope)
        if built is not None and built.api == "torch.nn.MultiheadAttention":
            found[ctx.line(call)] = [ctx.line(use.call) for use in calls.module_calls(ctx, built)]
    return found


def test_each_layer_of_a_literal_is_paired_with_the_loop_and_a_stranger_is_not():
    source = """\
        import torch.nn as nn
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([
                    nn.MultiheadAttention(64, 8),
                    nn.MultiheadAttention(64, 8),
                ])
                self.other = nn.MultiheadAttention(64, 8)
            def forward(self, x):
                for layer in self.layers:
                    x = layer(x, x, x)[0]
                return x
    """
    assert _module_calls(source) == {6: [12], 7: [12], 9: []}


def test_a_stack_with_a_layer_that_cannot_be_named_pairs_nothing():
    """One element built by a call mhalint cannot follow makes what the container holds unknown."""
    source = """\
        import torch.nn as nn
        from elsewhere import make
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = nn.ModuleList([nn.MultiheadAttention(64, 8), make()])
            def forward(self, x):
                for layer in self.layers:
                    x = layer(x, x, x)[0]
                return x
    """
    assert _module_calls(source) == {6: []}


LAYERED = """\
import torch.nn as nn

class AttentionLayer(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.attn = nn.MultiheadAttention(d, h)
        self.norm = nn.LayerNorm(d)

    def forward(self, x):
        return self.norm(x + self.attn(x, x, x)[0])

class FeedForward(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.linear = nn.Linear(d, d)

    def forward(self, x):
        return x + self.linear(x)

class Decoder(nn.Module):
    def __init__(self, d=64, h=8, n=4):
        super().__init__()
        self.attention_layers = nn.ModuleList()
        self.ffn_layers = nn.ModuleList()
        for _ in range(n):
            self.attention_layers.append(AttentionLayer(d, h))
            self.ffn_layers.append(FeedForward(d))

    def forward(self, x):
        {unpack}
        for i in range(len(self.attention_layers)):
            x = {between}
            x = self.attention_layers[i](x)
        return x
"""


@pytest.mark.parametrize("between", [
    pytest.param("self.ffn_layers[i](x)", id="feed-forward"),
    pytest.param("x.contiguous()", id="kept"),
])
def test_a_loop_body_of_several_layers_keeps_the_layout_from_before_the_loop(lint, between):
    """The attention's input is what the layer before it in the loop body gave, whose input is the loop's value:
    the value before the loop on the first round, the attention layer's output on the others. Every layer keeps the
    axes, so the layout before the loop decides."""
    (error,) = lint(LAYERED.format(unpack="B, T, C = x.shape", between=between), CODE, "info")
    assert_batch_first_error(error, "B, T, C = x.shape")
    (info,) = lint(LAYERED.format(unpack="T, B, C = x.shape", between=between), CODE, "info")
    assert_sequence_first_info(info, "T, B, C = x.shape")


def test_a_loop_body_that_swaps_axes_every_round_is_unknown(lint):
    """Each round transposes the previous round's output: the layout before the loop holds every other round."""
    (finding,) = lint(LAYERED.format(unpack="B, T, C = x.shape", between="x.transpose(0, 1)"), CODE, "info")
    assert_unknown_warning(finding)
    assert finding.message.endswith("`B, T, C = x.shape` and `x.transpose(0, 1)` disagree on the data's layout")
    assert "`x.transpose(0, 1)` at line 32 shows sequence-first" in finding.evidence[-1]


CLONE_METHOD = f"""\
import copy
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, d=64, h=8, n=4):
        super().__init__()
        self.layers = self._get_clones({LAYER}, n)

    def _get_clones(self, module, N):
        return nn.ModuleList([copy.deepcopy(module) for i in range(N)])

    def forward(self, x):
        {{unpack}}
        for layer in self.layers:
            x = layer(x)
        return x
"""


def test_a_clone_helper_method_is_read_through_its_return(lint):
    _each_layout(lint, CLONE_METHOD)
