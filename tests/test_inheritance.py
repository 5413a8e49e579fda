"""A project subclass of a torch attention class is that API (issue 35, item 2): its constructor's arguments reach
torch's (as written, through `*args, **kwargs`, or through its own `__init__`'s `super().__init__(...)`), its
instances' calls run torch's forward unless it overrides it, and an overriding forward that calls
`self.self_attn(...)` or `super().forward(...)` runs the layer's attention with the layer's batch_first. Bases are
followed several levels deep and into other files of the run."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_project import mha001, write

from mhalint.analysis.calls import call_target
from mhalint.context import ModuleContext
from mhalint.finding import Severity
from mhalint.parse.lazy import cst

CODE = "MHA001"
BATCH_FIRST = "B, T, C = x.shape"
SEQUENCE_FIRST = "T, B, C = x.shape"


@pytest.fixture
def check(lint):
    def run(source: str):
        found = lint(source, CODE, min_severity="info")
        assert all(f.code == CODE for f in found), found
        return found
    return run


def sites(found) -> list[tuple[int, Severity]]:
    return [(f.line, f.severity) for f in found]


SUBCLASSES = {
    "no-init": "class MyAttn(nn.MultiheadAttention):\n    pass\n",
    "forwarding-init": "class MyAttn(nn.MultiheadAttention):\n    def __init__(self, *args, **kwargs):\n"
                       "        super().__init__(*args, **kwargs)\n        self.name = 'attn'\n",
    "two-levels": "class Base(nn.MultiheadAttention):\n    pass\n\nclass MyAttn(Base):\n    pass\n",
    "forward-calling-super": "class MyAttn(nn.MultiheadAttention):\n    def forward(self, q, k, v, **kw):\n"
                             "        return super().forward(q, k, v, **kw)\n",
}


def using(subclass: str, arguments: str, unpack: str) -> str:
    return f"""import torch.nn as nn

{subclass}

def run(x):
    attn = MyAttn({arguments})
    {unpack}
    return attn(x, x, x)[0]
"""


def line_of(source: str, text: str) -> int:
    return next(number for number, line in enumerate(source.splitlines(), 1) if text in line)


@pytest.mark.parametrize("kind", SUBCLASSES)
def test_a_subclass_built_with_torchs_arguments_and_batch_first_data_is_an_error(check, kind):
    source = using(SUBCLASSES[kind], "64, 8", BATCH_FIRST)
    [finding] = check(source)
    assert (finding.line, finding.severity) == (line_of(source, "MyAttn(64"), Severity.ERROR)
    assert "gets batch-first data (`B, T, C = x.shape`" in finding.message
    assert finding.fix is not None and finding.fix.edits[0].content == ", batch_first=True"


@pytest.mark.parametrize("kind", SUBCLASSES)
def test_a_subclass_with_sequence_first_data_is_info_and_with_batch_first_true_clean(check, kind):
    source = using(SUBCLASSES[kind], "64, 8", SEQUENCE_FIRST)
    assert sites(check(source)) == [(line_of(source, "MyAttn(64"), Severity.INFO)]
    assert check(using(SUBCLASSES[kind], "64, 8, batch_first=True", BATCH_FIRST)) == []


OWN_INIT = """import torch.nn as nn

class MyAttn(nn.MultiheadAttention):
    def __init__(self, dim, heads, batch_first={default}):
        super().__init__(dim, heads, batch_first=batch_first)

class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = MyAttn(64, 8)

    def forward(self, x):
        {unpack}
        return self.attn(x, x, x)[0]
"""


def test_a_subclass_with_its_own_init_is_decided_at_its_super_init_by_its_instances_calls(check):
    [finding] = check(OWN_INIT.format(default="False", unpack=BATCH_FIRST))
    assert (finding.line, finding.severity) == (5, Severity.ERROR)
    assert "but batch_first=batch_first is False" in finding.message
    assert sites(check(OWN_INIT.format(default="False", unpack=SEQUENCE_FIRST))) == [(5, Severity.INFO)]
    assert check(OWN_INIT.format(default="True", unpack=BATCH_FIRST)) == []


def test_a_subclass_built_with_torchs_default_and_no_call_stays_a_warning(check):
    found = check("import torch.nn as nn\nclass MyAttn(nn.MultiheadAttention):\n    pass\nattn = MyAttn(64, 8)\n")
    assert sites(found) == [(4, Severity.WARNING)]


LAYER = """import torch.nn as nn

class Layer(nn.{base}):
    def forward(self, src, *args, **kwargs):
        {unpack}
        {body}

layer = Layer(64, 8{extra})
"""
BODIES = {
    "self-attn": "return self.self_attn(src, src, src, need_weights=False)[0]",
    "super-forward": "return super().forward(src, *args, **kwargs)",
}


@pytest.mark.parametrize("body", BODIES)
def test_an_overridden_layer_forward_runs_the_layers_attention_with_the_layers_batch_first(check, body):
    source = LAYER.format(base="TransformerEncoderLayer", unpack=BATCH_FIRST.replace("x", "src"),
                          body=BODIES[body], extra="")
    [finding] = check(source)
    assert (finding.line, finding.severity) == (8, Severity.ERROR)
    assert finding.message.startswith("nn.TransformerEncoderLayer gets batch-first data (`B, T, C = src.shape`")
    assert check(source.replace("Layer(64, 8)", "Layer(64, 8, batch_first=True)")) == []


def test_a_decoder_layers_cross_attention_is_its_multihead_attn(check):
    source = LAYER.format(base="TransformerDecoderLayer", unpack=SEQUENCE_FIRST.replace("x", "src"),
                          body="return self.multihead_attn(src, src, src, need_weights=False)[0]", extra="")
    assert sites(check(source)) == [(8, Severity.INFO)]


def test_a_layer_subclass_that_sets_its_own_self_attn_is_read_as_its_own(check):
    """The attribute the subclass assigns hides torch's: its own MultiheadAttention is the one called."""
    found = check("""import torch.nn as nn

class Layer(nn.TransformerEncoderLayer):
    def __init__(self, d, h):
        super().__init__(d, h, batch_first=True)
        self.self_attn = nn.MultiheadAttention(d, h)

    def forward(self, src):
        B, T, C = src.shape
        return self.self_attn(src, src, src)[0]

layer = Layer(64, 8)
""")
    assert sites(found) == [(6, Severity.ERROR)]


def test_a_subclass_whose_forward_uses_nothing_of_torchs_is_its_own_class(check):
    """Its constructor's batch_first reaches no attention that runs: nothing to say (as before)."""
    assert check("""import torch.nn as nn

class Layer(nn.TransformerEncoderLayer):
    def forward(self, src):
        return src * 2

layer = Layer(64, 8)
""") == []


def test_a_subclass_beside_a_base_from_another_package_stays_a_warning_that_names_it(check):
    source = using("from fancy.mixins import LoggingMixin\n\nclass MyAttn(LoggingMixin, nn.MultiheadAttention):\n"
                   "    pass\n", "64, 8", BATCH_FIRST)
    [finding] = check(source)
    assert finding.severity == Severity.WARNING
    assert "assuming `LoggingMixin` passes it on unchanged" in " | ".join(finding.evidence)


def test_a_class_derived_from_another_packages_class_is_not_torchs(check):
    assert check(using("from fancy.attention import Attention\n\nclass MyAttn(Attention):\n    pass\n", "64, 8",
                       BATCH_FIRST)) == []


def test_calls_in_a_subclass_reach_torchs_forward():
    source = """import torch.nn as nn
class Layer(nn.TransformerDecoderLayer):
    def forward(self, tgt, memory, tgt_mask=None):
        y = self.self_attn(tgt, tgt, tgt, attn_mask=tgt_mask)[0]
        return super().forward(y, memory, tgt_mask)
layer = Layer(64, 8)
"""
    module = cst.parse_module(source)
    ctx = ModuleContext(module, "snippet.py", source)
    targets = {ctx.code(call.func): call_target(ctx, call, scope) for call, scope in ctx.calls()}
    attention = targets["self.self_attn"]
    assert attention.api == "torch.nn.MultiheadAttention" and attention.arguments.get("attn_mask").value == "tgt_mask"
    assert ctx.code(attention.construction.arguments.get("embed_dim")) == "64"
    layer = targets["super().forward"]
    assert layer.api == "torch.nn.TransformerDecoderLayer" and layer.arguments.get("tgt_mask").value == "tgt_mask"


SUBCLASS_FILE = """\
    import torch.nn as nn

    class MyAttn(nn.MultiheadAttention):
        pass
"""
USER_FILE = """\
    from {module} import MyAttn

    def run(x):
        attn = MyAttn(64, 8{extra})
        {unpack}
        return attn(x, x, x)[0]
"""


@pytest.mark.parametrize(("files", "user"), [
    pytest.param({"layers.py": SUBCLASS_FILE}, ("model.py", "layers"), id="script-directory"),
    pytest.param({"pkg/__init__.py": "", "pkg/layers.py": SUBCLASS_FILE}, ("pkg/model.py", ".layers"), id="relative"),
])
def test_a_subclass_from_another_file_is_decided_where_it_is_built(tmp_path, files, user):
    path, module = user
    write(tmp_path, {**files, path: USER_FILE.format(module=module, extra="", unpack=BATCH_FIRST)})
    [finding] = mha001(tmp_path)
    assert Path(finding.path).name == "model.py" and (finding.line, finding.severity) == (4, Severity.ERROR)
    write(tmp_path, {path: USER_FILE.format(module=module, extra=", batch_first=True", unpack=BATCH_FIRST)})
    assert mha001(tmp_path) == []


def test_bases_are_followed_through_the_files_that_import_them(tmp_path):
    """`MyAttn(Base)` in layers.py, `Base(nn.MultiheadAttention)` in base.py: the class headers lead to torch's."""
    write(tmp_path, {"base.py": SUBCLASS_FILE.replace("MyAttn", "Base"),
                     "layers.py": "from base import Base\n\nclass MyAttn(Base):\n    pass\n",
                     "model.py": USER_FILE.format(module="layers", extra="", unpack=BATCH_FIRST)})
    [finding] = mha001(tmp_path)
    assert Path(finding.path).name == "model.py" and finding.severity == Severity.ERROR


def test_a_layers_own_attention_block_runs_its_attention(check):
    """`self._sa_block(x, ...)` (torch's method, not overridden) calls `self.self_attn(x, x, x, ...)`: the layer's
    batch_first reads its first argument; a subclass that sets its own `self_attn` is not read through it."""
    source = LAYER.format(base="TransformerEncoderLayer", unpack=BATCH_FIRST.replace("x", "src"),
                          body="return src + self._sa_block(src, None, None)", extra="")
    assert sites(check(source)) == [(8, Severity.ERROR)]
    own = source.replace("    def forward", "    def __init__(self, d, h):\n        super().__init__(d, h)\n"
                         "        self.self_attn = Attention(d, h)\n\n    def forward")
    assert sites(check(own)) == [(5, Severity.WARNING)]  # its super().__init__, as before: no call is paired
