"""The runtime guard (`mhalint.guard`) and its pytest plugin.

The plugin is exercised through real pytest runs (pytester, in a subprocess so that the installed `pytest11` entry
point is what loads it) on small test files that trigger each check and on correct code that triggers none; the
outputs those files compute are saved and compared tensor-exactly between a run with the guard and one without.
The context manager's own behaviour (restoring torch, de-duplication, call sites, error mode, no false alarms) is
tested in-process. Each subprocess run imports torch (about 2 s).
"""

from __future__ import annotations

import pickle
import re
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

pytest_plugins = ["pytester"]

THIS_FILE = str(Path(__file__).resolve())


def _torch():
    return pytest.importorskip("torch")


# --------------------------------------------------------------------------------------- import cost

def test_importing_mhalint_and_the_plugin_does_not_import_torch():
    code = ("import sys, mhalint, mhalint.guard, mhalint.guard.plugin, mhalint.run.engine\n"
            "assert callable(mhalint.guard) and mhalint.guard.AttentionGuardWarning\n"
            "bad = [m for m in ('torch', 'mhalint.guard.core', 'mhalint.guard.support') if m in sys.modules]\n"
            "assert not bad, bad\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_mhalint_guard_is_the_package_and_callable():
    import mhalint
    import mhalint.guard as package
    from mhalint.guard import guard

    assert mhalint.guard is package
    with pytest.raises(ValueError, match="mode must be one of"):
        mhalint.guard("loud")
    _torch()
    assert type(mhalint.guard("error")).__name__ == "Guard" and type(guard()).__name__ == "Guard"


# --------------------------------------------------------------------------------------- the plugin, for real

CONFTEST = """
import os
import pytest
import torch

torch.set_num_threads(1)


@pytest.fixture
def record():
    def save(name, value):
        torch.save(value, os.path.join(os.environ["MHALINT_GUARD_TEST_OUT"], name + ".pt"))
    return save
"""

# Each bad file marks the line of the offending call with `# <- CODE`; the summary must name exactly that site.
BAD_FILES = {
    "test_fully_padded.py": """
        import torch
        import torch.nn as nn


        def test_fully_padded_sample(record):
            torch.manual_seed(0)
            mha = nn.MultiheadAttention(16, 4, batch_first=True).eval()
            x = torch.randn(3, 5, 16)
            padding = torch.zeros(3, 5, dtype=torch.bool)
            padding[1] = True
            with torch.no_grad():
                for i in range(3):
                    out, weights = mha(x, x, x, key_padding_mask=padding)  # <- MHA101
                    record(f"fully_padded_{i}", (out, weights))
        """,
    "test_flipped_causal.py": """
        import torch
        import torch.nn.functional as F


        def test_mha_causal_mask_given_to_sdpa(record):
            torch.manual_seed(0)
            q = torch.randn(2, 4, 6, 8)
            causal = torch.triu(torch.ones(6, 6, dtype=torch.bool), diagonal=1)
            out = F.scaled_dot_product_attention(q, q, q, attn_mask=causal)  # <- MHA002
            record("flipped_causal", out)
        """,
    "test_dropout_in_eval.py": """
        import torch
        import torch.nn.functional as F


        def test_sdpa_dropout_under_no_grad(record):
            torch.manual_seed(0)
            q = torch.randn(2, 4, 6, 8)
            with torch.no_grad():
                out = F.scaled_dot_product_attention(q, q, q, dropout_p=0.1)  # <- MHA011
            record("dropout_in_eval", out)
        """,
    "test_is_causal.py": """
        import pytest
        import torch
        import torch.nn as nn


        def test_is_causal_is_dropped_in_inference(record):
            torch.manual_seed(0)
            mha = nn.MultiheadAttention(16, 4, batch_first=True).eval()
            x = torch.randn(2, 6, 16)
            with torch.no_grad():
                out, _ = mha(x, x, x, is_causal=True, need_weights=False)  # <- MHA003
            record("is_causal_eval", out)


        def test_is_causal_raises_in_training():
            torch.manual_seed(0)
            mha = nn.MultiheadAttention(16, 4, batch_first=True)
            x = torch.randn(2, 6, 16)
            with pytest.raises(RuntimeError, match="Need attn_mask"):
                mha(x, x, x, is_causal=True)  # <- MHA003
        """,
    "test_repeat_layout.py": """
        import torch
        import torch.nn as nn


        def test_per_sample_mask_tiled_with_repeat(record):
            torch.manual_seed(0)
            heads, n, length = 4, 3, 5
            mha = nn.MultiheadAttention(16, heads, batch_first=True)
            x = torch.randn(n, length, 16)
            lengths = torch.tensor([5, 3, 2])
            padding = torch.arange(length)[None, :] >= lengths[:, None]
            per_sample = padding[:, None, :].expand(n, length, length)
            mask = per_sample.repeat(heads, 1, 1)
            out, _ = mha(x, x, x, attn_mask=mask)  # <- MHA006
            record("repeat_layout", out)
        """,
    "test_float_keep_mask.py": """
        import torch
        import torch.nn.functional as F


        def test_tril_ones_as_sdpa_mask(record):
            torch.manual_seed(0)
            q = torch.randn(2, 4, 6, 8)
            causal = torch.tril(torch.ones(6, 6))
            out = F.scaled_dot_product_attention(q, q, q, attn_mask=causal)  # <- MHA008
            record("float_keep_mask", out)
        """,
    "test_sdpa_broadcast.py": """
        import torch
        import torch.nn.functional as F


        def test_padding_mask_without_broadcast_dims(record):
            torch.manual_seed(0)
            q = torch.randn(4, 2, 4, 8)
            lengths = torch.tensor([4, 2, 1, 3])
            keep = torch.arange(4)[None, :] < lengths[:, None]
            out = F.scaled_dot_product_attention(q, q, q, attn_mask=keep)  # <- MHA102
            record("sdpa_broadcast", out)
        """,
    "test_nan_output.py": """
        import torch
        import torch.nn as nn


        def test_nan_from_upstream(record):
            torch.manual_seed(0)
            mha = nn.MultiheadAttention(16, 4)
            x = torch.randn(5, 2, 16)
            x[3, 1, 0] = float("nan")
            out, _ = mha(x, x, x, need_weights=False)  # <- MHA103
            record("nan_output", out)
        """,
    "test_transformer_layer.py": """
        import torch
        import torch.nn as nn


        def test_encoder_layer_with_a_fully_padded_sample(record):
            torch.manual_seed(0)
            layer = nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True).eval()
            x = torch.randn(3, 5, 16)
            padding = torch.zeros(3, 5, dtype=torch.bool)
            padding[2] = True
            with torch.no_grad():
                out = layer(x, src_key_padding_mask=padding)  # <- MHA101
            record("encoder_layer", out)
        """,
    "test_flex_anti_causal.py": """
        import torch
        from torch.nn.attention.flex_attention import create_block_mask, flex_attention


        def hide_the_future(b, h, q_idx, kv_idx):
            return q_idx < kv_idx


        def test_flex_mask_mod_in_the_true_is_hide_habit(record):
            torch.manual_seed(0)
            q = torch.randn(2, 4, 16, 8)
            mask = create_block_mask(hide_the_future, None, None, 16, 16, device="cpu")
            out = flex_attention(q, q, q, block_mask=mask)  # <- MHA015
            record("flex_anti_causal", out)
        """,
}

GOOD_FILE = """
    import torch
    import torch.nn as nn
    import torch.nn.functional as F


    def test_correct_attention_code(record):
        torch.manual_seed(0)
        n, length, embed, heads = 3, 6, 16, 4
        x = torch.randn(n, length, embed)
        lengths = torch.tensor([6, 4, 5])
        padding = torch.arange(length)[None, :] >= lengths[:, None]  # True = padding (MultiheadAttention)
        causal = nn.Transformer.generate_square_subsequent_mask(length)  # float, -inf above the diagonal
        causal_bool = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)
        mha = nn.MultiheadAttention(embed, heads, batch_first=True)
        outputs = {}
        for mode in ("train", "eval"):
            mha.train(mode == "train")
            with torch.no_grad():
                outputs[mode + "_kpm"] = mha(x, x, x, key_padding_mask=padding)
                outputs[mode + "_causal"] = mha(x, x, x, attn_mask=causal_bool, key_padding_mask=padding,
                                                need_weights=False)
                outputs[mode + "_hint"] = mha(x, x, x, attn_mask=causal, is_causal=True, need_weights=False)
                per_sample = (padding[:, None, :] | causal_bool).repeat_interleave(heads, dim=0)
                outputs[mode + "_3d"] = mha(x, x, x, attn_mask=per_sample)
                shared = causal_bool.repeat(n * heads, 1, 1)  # one mask for every sample: either layout is right
                outputs[mode + "_shared"] = mha(x, x, x, attn_mask=shared)
                slopes = torch.arange(1, heads + 1, dtype=torch.float)[:, None, None]
                alibi = -slopes * (torch.arange(length)[None, :] - torch.arange(length)[:, None]).abs()
                outputs[mode + "_alibi"] = mha(x, x, x, attn_mask=alibi.repeat(n, 1, 1))
        q = torch.randn(n, heads, length, embed // heads)
        keep = ~padding
        outputs["sdpa_kpm"] = F.scaled_dot_product_attention(q, q, q, attn_mask=keep[:, None, None, :])
        outputs["sdpa_causal"] = F.scaled_dot_product_attention(q, q, q, is_causal=True)
        outputs["sdpa_tril"] = F.scaled_dot_product_attention(q, q, q, attn_mask=torch.tril(torch.ones(
            length, length, dtype=torch.bool)))
        pairs = keep[:, None, :, None] & keep[:, None, None, :]  # padded queries have no key: zeros, expected
        outputs["sdpa_pairs"] = F.scaled_dot_product_attention(q, q, q, attn_mask=pairs)
        additive = torch.zeros(n, 1, 1, length).masked_fill(padding[:, None, None, :], float("-inf"))
        outputs["sdpa_additive"] = F.scaled_dot_product_attention(q, q, q, attn_mask=additive)
        square = torch.randn(length, heads, length, embed // heads)  # N == L with a real (L, S) mask
        outputs["sdpa_square"] = F.scaled_dot_product_attention(square, square, square,
                                                                attn_mask=torch.tril(torch.ones(
                                                                    length, length, dtype=torch.bool)))
        layer = nn.TransformerEncoderLayer(embed, heads, 32, dropout=0.0, batch_first=True).eval()
        encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(embed, heads, 32, dropout=0.0,
                                                                   batch_first=True), 2,
                                        enable_nested_tensor=False).eval()
        decoder = nn.TransformerDecoderLayer(embed, heads, 32, dropout=0.0, batch_first=True).eval()
        with torch.no_grad():
            outputs["layer"] = layer(x, src_mask=causal_bool, src_key_padding_mask=padding, is_causal=True)
            outputs["encoder"] = encoder(x, mask=causal, src_key_padding_mask=padding.float().masked_fill(
                padding, float("-inf")))
            outputs["decoder"] = decoder(x, x, tgt_mask=causal_bool, tgt_key_padding_mask=padding,
                                         memory_key_padding_mask=padding)
        record("correct", outputs)
    """


def _site_lines(source: str) -> dict[int, str]:
    """{line: code} for the `# <- CODE` markers of a dedented test file."""
    return {number: match.group(1) for number, text in enumerate(source.splitlines(), 1)
            if (match := re.search(r"# <- (MHA\d+)", text))}


def _write_project(pytester, with_good: bool = True) -> dict[str, str]:
    files = {name: textwrap.dedent(source).lstrip("\n") for name, source in BAD_FILES.items()}
    if with_good:
        files["test_correct.py"] = textwrap.dedent(GOOD_FILE).lstrip("\n")
    pytester.makeconftest(CONFTEST)
    for name, source in files.items():
        pytester.makepyfile(**{name[:-3]: source})
    return files


def _summary(output: str) -> list[str]:
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if re.match(r"=+ mhalint guard =+$", line))
    section = []
    for line in lines[start + 1:]:
        if line.startswith("==="):
            break
        section.append(line)
    return section


@pytest.mark.slow
def test_plugin_reports_each_check_at_the_users_line_and_never_changes_outputs(torch, pytester, monkeypatch, tmp_path):
    # `torch` (a session fixture) is imported before pytester snapshots sys.modules: imported during the test,
    # it would be dropped at teardown, and importing its C extension a second time fails.
    files = _write_project(pytester)
    outputs = {}
    for state, args in (("on", ["--mhalint-guard"]), ("off", [])):
        folder = tmp_path / state
        folder.mkdir()
        monkeypatch.setenv("MHALINT_GUARD_TEST_OUT", str(folder))
        result = pytester.runpytest_subprocess(*args, "-p", "no:cacheprovider")
        result.assert_outcomes(passed=len(files) + 1)  # test_is_causal.py holds two tests
        outputs[state] = {path.name: torch.load(path) for path in sorted(folder.iterdir())}
        text = result.stdout.str()
        if state == "off":
            assert "mhalint guard" not in text and "AttentionGuardWarning" not in text
            continue
        summary = _summary(text)
        expected = {(code, f"{name}:{line}") for name, source in files.items()
                    for line, code in _site_lines(source).items()}
        seen = set()
        for line in summary[:-1]:
            match = re.match(r"(MHA\d+) (\S+) +(\d+)x  (\S+)  (.+)$", line)
            assert match, line
            seen.add((match.group(1), match.group(4)))
            assert match.group(2) and match.group(5)
        assert seen == expected, (seen ^ expected, text)
        assert not any("test_correct.py" in line for line in summary)
        # De-duplication: the fully padded call ran 3 times, is counted 3 times and warned about once.
        padded = next(line for line in summary if "test_fully_padded.py" in line)
        assert re.search(r" 3x ", padded), padded
        assert text.count("AttentionGuardWarning: MHA101 fully-masked-rows") == 2  # two sites, one warning each
        sites = len(expected)
        assert re.search(rf"{sites} pitfall\(s\) at {sites} call site\(s\), {sites + 2} occurrence\(s\) in \d+ "
                         r"checked attention calls \(warn mode\)", summary[-1]), summary[-1]
    assert outputs["on"].keys() == outputs["off"].keys() and len(outputs["on"]) == len(BAD_FILES) + 3

    def same(a, b):
        if isinstance(a, torch.Tensor):
            return isinstance(b, torch.Tensor) and a.dtype == b.dtype and a.shape == b.shape and bool(
                torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0)))
        if isinstance(a, (tuple, list)):
            return type(a) is type(b) and len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
        if isinstance(a, dict):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        return a == b

    for name in outputs["on"]:
        assert same(outputs["on"][name], outputs["off"][name]), name
    assert torch.isnan(outputs["on"]["fully_padded_0.pt"][0][1]).all()  # the pitfall really was there


@pytest.mark.slow
def test_plugin_error_mode_fails_the_tests_with_a_pitfall(torch, pytester, monkeypatch, tmp_path):
    _write_project(pytester)
    monkeypatch.setenv("MHALINT_GUARD_TEST_OUT", str(tmp_path))
    result = pytester.runpytest_subprocess("--mhalint-guard=error", "-p", "no:cacheprovider")
    # Every bad test fails except the one where torch itself raises: its RuntimeError is kept (with a note), so
    # pytest.raises(RuntimeError) still passes.
    result.assert_outcomes(failed=len(BAD_FILES), passed=2)
    text = result.stdout.str()
    for code in ("MHA002", "MHA003", "MHA006", "MHA008", "MHA101", "MHA102", "MHA103"):
        assert re.search(rf"AttentionGuardError: {code} ", text), code
    assert "FAILED test_is_causal.py::test_is_causal_raises_in_training" not in text
    assert "FAILED test_correct.py" not in text


def test_plugin_is_off_by_default_and_then_imports_nothing(pytester):
    pytester.makepyfile(test_trivial="""
        import sys


        def test_nothing_was_imported():
            loaded = [m for m in ("torch", "mhalint.guard.core", "mhalint.guard.support") if m in sys.modules]
            assert not loaded, loaded
        """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    assert "mhalint guard" not in result.stdout.str()
    help_text = pytester.runpytest_subprocess("--help").stdout.str()
    assert "--mhalint-guard" in help_text


# --------------------------------------------------------------------------------------- the context manager

def _entry_points(torch):
    nn, F = torch.nn, torch.nn.functional
    classes = (nn.MultiheadAttention, nn.TransformerEncoderLayer, nn.TransformerDecoderLayer, nn.TransformerEncoder,
               nn.TransformerDecoder, nn.Transformer)
    return ({cls: cls.__dict__["forward"] for cls in classes},
            {name: getattr(F, name) for name in ("scaled_dot_product_attention", "multi_head_attention_forward")})


def _fully_padded(torch):
    torch.manual_seed(0)
    mha = torch.nn.MultiheadAttention(16, 4, batch_first=True).eval()
    x = torch.randn(3, 5, 16)
    padding = torch.zeros(3, 5, dtype=torch.bool)
    padding[1] = True
    return mha, x, padding


def test_torch_is_restored_on_exit_on_exceptions_and_after_nested_use():
    torch = _torch()
    import mhalint

    before = _entry_points(torch)
    with mhalint.guard():
        patched = _entry_points(torch)
        assert all(patched[0][cls] is not before[0][cls] for cls in before[0])
        assert all(patched[1][name] is not before[1][name] for name in before[1])
        assert torch.nn.functional.scaled_dot_product_attention.__name__ == "scaled_dot_product_attention"
        with mhalint.guard("error"):  # nested: the wrappers stay installed once
            assert _entry_points(torch) == patched
        assert _entry_points(torch) == patched  # the inner exit leaves the outer guard working
    assert _entry_points(torch) == before
    with pytest.raises(KeyError):
        with mhalint.guard():
            raise KeyError("boom")
    assert _entry_points(torch) == before
    reentrant = mhalint.guard()
    with reentrant:
        with reentrant:
            pass
        assert _entry_points(torch) != before
    assert _entry_points(torch) == before

    @mhalint.guard()
    def decorated():
        return _entry_points(torch) != before

    assert decorated() and _entry_points(torch) == before


def test_reports_are_deduplicated_per_code_and_site_and_counted():
    torch = _torch()
    import mhalint
    from mhalint.guard import AttentionGuardWarning

    mha, x, padding = _fully_padded(torch)
    with warnings.catch_warnings(record=True) as caught, mhalint.guard() as guard:
        warnings.simplefilter("always")
        with torch.no_grad():
            for _ in range(3):
                mha(x, x, x, key_padding_mask=padding)
            mha(x, x, x, key_padding_mask=padding)
    ours = [w for w in caught if issubclass(w.category, AttentionGuardWarning)]
    assert [(w.message.code, w.filename == THIS_FILE) for w in ours] == [("MHA101", True)] * 2
    first, second = sorted(ours, key=lambda w: w.lineno)
    assert second.lineno == first.lineno + 1
    assert [(e.report.code, e.count) for e in guard.reports()] == [("MHA101", 3), ("MHA101", 1)]
    assert guard.calls == 4
    assert first.message.site.endswith(f":{first.lineno}") and "sample 1" in first.message.message
    # A new guard warns again; the counts belong to each activation.
    with warnings.catch_warnings(record=True) as caught, mhalint.guard() as again:
        warnings.simplefilter("always")
        with torch.no_grad():
            mha(x, x, x, key_padding_mask=padding)
    assert [w.message.code for w in caught if issubclass(w.category, AttentionGuardWarning)] == ["MHA101"]
    assert [e.count for e in again.reports()] == [1]


def _call_from_a_helper(module, x, padding):
    return module(x, src_key_padding_mask=padding)  # the site: the user's own line, not torch's


def test_the_site_is_the_users_line_and_internal_calls_are_not_reported_again():
    torch = _torch()
    import mhalint

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 4, 32, dropout=0.0, batch_first=True)
    x = torch.randn(3, 5, 16)
    padding = torch.zeros(3, 5, dtype=torch.bool)
    padding[0] = True
    for train in (False, True):  # fused kernel, then MultiheadAttention -> F.mha_forward -> SDPA inside
        layer.train(train)
        with warnings.catch_warnings(record=True) as caught, mhalint.guard() as guard, torch.no_grad():
            warnings.simplefilter("always")
            _call_from_a_helper(layer, x, padding)
        entries = guard.reports()
        assert [(e.report.code, e.report.api, e.count) for e in entries] == [
            ("MHA101", "nn.TransformerEncoderLayer", 1)]
        site = entries[0].report.site
        line = _call_from_a_helper.__code__.co_firstlineno + 1
        assert (site.filename, site.lineno) == (THIS_FILE, line)
        assert [(w.filename, w.lineno) for w in caught if w.category.__name__ == "AttentionGuardWarning"] == [
            (THIS_FILE, line)]


def test_error_mode_raises_after_the_call_and_keeps_torchs_own_errors():
    torch = _torch()
    import mhalint
    from mhalint.guard import AttentionGuardError

    mha, x, padding = _fully_padded(torch)
    with mhalint.guard("error"), torch.no_grad():
        with pytest.raises(AttentionGuardError) as raised:
            mha(x, x, x, key_padding_mask=padding)
    assert raised.value.code == "MHA101" and "sample 1" in raised.value.message
    assert raised.value.site.endswith(".py:" + raised.value.site.rsplit(":", 1)[1])
    mha.train()
    with mhalint.guard("error") as guard:
        with pytest.raises(RuntimeError, match="Need attn_mask") as torch_error:
            mha(x, x, x, is_causal=True)
    if sys.version_info >= (3, 11):  # exception notes
        assert any("MHA003" in note and "raised RuntimeError" in note for note in torch_error.value.__notes__)
    assert [e.report.code for e in guard.reports()] == ["MHA003"]


def test_warning_and_error_carry_code_site_and_message_and_pickle():
    from mhalint.guard import AttentionGuardError, AttentionGuardWarning, guard_codes

    for cls in (AttentionGuardWarning, AttentionGuardError):
        report = cls("MHA101", "model.py:12", "sample 1 has no key.")
        copy = pickle.loads(pickle.dumps(report))
        assert (copy.code, copy.site, copy.message) == ("MHA101", "model.py:12", "sample 1 has no key.")
        assert str(report).startswith("MHA101 fully-masked-rows")
    from mhalint.guard.reports import Report, Site

    report = Report("MHA101", Site("model.py", 12), "nn.MultiheadAttention", "sample 1 has no key. A softmax\nFix: x")
    assert report.headline == "sample 1 has no key. A softmax"  # the first line, whole
    assert set(guard_codes()) == {"MHA002", "MHA003", "MHA006", "MHA008", "MHA011", "MHA015", "MHA101", "MHA102",
                                  "MHA103"}


def _pitfall_setting(torch):
    """What both message tests give the guard: a batch-first MultiheadAttention (E=16, 4 heads) on (3, 5, 16) data,
    a padding mask with lengths 5, 3, 2 tiled head-major as `.repeat(4, 1, 1)` builds it, and a (2, 4, 6, 8) query
    for SDPA."""
    torch.manual_seed(0)
    heads, n, length = 4, 3, 5
    mha = torch.nn.MultiheadAttention(16, heads, batch_first=True)
    x = torch.randn(n, length, 16)
    padding = torch.arange(length)[None, :] >= torch.tensor([5, 3, 2])[:, None]
    tiled = padding[:, None, :].expand(n, length, length).repeat(heads, 1, 1)  # noqa: MHA006
    return mha, x, tiled, torch.randn(2, 4, 6, 8)


def test_messages_name_the_evidence_and_the_fix():
    torch = _torch()
    import mhalint

    F = torch.nn.functional
    mha, x, tiled, q = _pitfall_setting(torch)
    with warnings.catch_warnings(), mhalint.guard() as guard:
        warnings.simplefilter("ignore")
        mha(x, x, x, attn_mask=tiled)
        F.scaled_dot_product_attention(q, q, q, attn_mask=torch.tril(torch.ones(6, 6)))
        mha.eval()
        with torch.no_grad():
            mha(x, x, x, is_causal=True)
    messages = {e.report.code: e.report.message for e in guard.reports()}
    assert "N=3 samples x num_heads=4" in messages["MHA006"] and "repeat_interleave(4, dim=0)" in messages["MHA006"]
    assert "torch 2.13 experiment: 1.517e-01 off the per-sample result" in messages["MHA006"]
    assert "21 ones among 36 entries" in messages["MHA008"] and "mask.bool()" in messages["MHA008"]
    assert 0.67 < _number(r"([0-9.]+) from the correctly masked result", messages["MHA008"]) < 0.68
    assert 0.32 < _number(r"([0-9.]+) from no mask at all", messages["MHA008"]) < 0.33
    assert "returned without error" in messages["MHA003"]
    assert 0.68 < _number(r"torch 2.13 experiment: ([0-9.]+) away from the causal one", messages["MHA003"]) < 0.7
    assert "generate_square_subsequent_mask" in messages["MHA003"]


def _number(pattern: str, text: str) -> float:
    match = re.search(pattern, text)
    assert match, (pattern, text)
    return float(match.group(1))


# For each code: what its headline must name (the decisive evidence seen at the call) and the docs section its why
# cites.
HEADLINES = {
    "MHA002": ("F.scaled_dot_product_attention got a bool attn_mask (6, 6) True only above the diagonal: a True = "
               "ignore causal mask, but SDPA reads True as attend", "docs/torch-facts.md#mask-convention"),
    "MHA003": ("nn.MultiheadAttention got is_causal=True and no attn_mask: no error, so the fused inference path "
               "ignored the flag", "docs/torch-facts.md#is-causal-hint"),
    "MHA006": ("nn.MultiheadAttention got a head-major 3-D attn_mask (12, 5, 5), as .repeat(4, 1, 1) builds it: 6 of "
               "12 (sample, head) pairs get another sample's mask", "docs/torch-facts.md#mask-repeat-layout"),
    "MHA008": ("F.scaled_dot_product_attention got a float attn_mask of only 0s and 1s (21 ones among 36 entries): "
               "added to the scores, it masks nothing", "docs/torch-facts.md#float-masks-are-additive"),
    "MHA101": ("nn.MultiheadAttention has query rows with no key to attend to in sample 1: the key_padding_mask row is "
               "all True, so every key is padding", "docs/torch-facts.md#fully-masked-rows"),
    "MHA102": ("F.scaled_dot_product_attention got a bool attn_mask (4, 4) of per-sample padding rows (True per row: "
               "[4, 2, 1, 3]), read as (L, S) since N = L = 4", "docs/torch-facts.md#sdpa-padding-broadcast"),
    "MHA103": ("nn.MultiheadAttention returned NaN in samples [1]: its inputs query, key, value already contain NaN",
               "docs/torch-facts.md#nan-output"),
}


def test_every_report_is_a_short_headline_then_the_fix_then_the_why():
    torch = _torch()
    import mhalint
    from mhalint.finding import HEADLINE_LIMIT

    nn, F = torch.nn, torch.nn.functional
    mha, x, tiled, q = _pitfall_setting(torch)
    q4 = torch.randn(4, 2, 4, 8)
    keep = torch.arange(4)[None, :] < torch.tensor([4, 2, 1, 3])[:, None]
    fully_padded = torch.zeros(3, 5, dtype=torch.bool)
    fully_padded[1] = True
    nan_input = torch.randn(5, 2, 16)
    nan_input[3, 1, 0] = float("nan")
    with warnings.catch_warnings(), mhalint.guard() as guard:
        warnings.simplefilter("ignore")
        mha(x, x, x, attn_mask=tiled)
        F.scaled_dot_product_attention(q, q, q, attn_mask=torch.tril(torch.ones(6, 6)))
        F.scaled_dot_product_attention(q, q, q, attn_mask=torch.triu(torch.ones(6, 6, dtype=torch.bool), 1))
        F.scaled_dot_product_attention(q4, q4, q4, attn_mask=keep)
        nn.MultiheadAttention(16, 4)(nan_input, nan_input, nan_input, need_weights=False)
        mha.eval()
        with torch.no_grad():
            mha(x, x, x, key_padding_mask=fully_padded)
            mha(x, x, x, is_causal=True, need_weights=False)
    reports = {e.report.code: e.report for e in guard.reports()}
    assert set(reports) == set(HEADLINES)
    for code, (headline, anchor) in HEADLINES.items():
        report = reports[code]
        first, fix, why = report.message.split("\n")
        assert report.headline == first == headline, report.message
        assert len(first) <= HEADLINE_LIMIT and not first.endswith("...")
        assert fix.startswith("Fix: ") and len(fix) > len("Fix: ") + 10, report.message
        assert anchor in why, report.message
        for stale in ("facts" + " sheet", "shared" + "/", "Measured", "measured", "§"):
            assert stale not in report.message, report.message
        numbers = re.findall(r"\b[0-9]+\.[0-9]+(?:e-?[0-9]+)?\b", why)  # the facts' numbers, never the call's
        if numbers:
            assert "torch 2.13 experiment" in why, report.message


def test_correct_code_and_the_fast_path_are_untouched():
    torch = _torch()
    import mhalint

    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    calls = {"fused": 0}
    original = torch._native_multi_head_attention

    def counting(*args, **kwargs):
        calls["fused"] += 1
        return original(*args, **kwargs)

    mha = nn.MultiheadAttention(16, 4, batch_first=True).eval()
    x = torch.randn(3, 5, 16)
    padding = torch.arange(5)[None, :] >= torch.tensor([5, 3, 4])[:, None]
    causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
    q = torch.randn(3, 4, 5, 4)

    def run():
        with torch.no_grad():
            return (mha(x, x, x, key_padding_mask=padding, attn_mask=causal),
                    F.scaled_dot_product_attention(q, q, q, attn_mask=~padding[:, None, None, :]),
                    F.scaled_dot_product_attention(q, q, q, is_causal=True))

    torch._native_multi_head_attention = counting
    try:
        plain = run()
        fused_without = calls["fused"]
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # any report here would be a false alarm
            with mhalint.guard() as guard:
                guarded = run()
    finally:
        torch._native_multi_head_attention = original
    assert guard.reports() == [] and guard.calls == 3
    assert calls["fused"] == 2 * fused_without == 2
    assert torch.equal(plain[0][0], guarded[0][0]) and torch.equal(plain[0][1], guarded[0][1])
    assert torch.equal(plain[1], guarded[1]) and torch.equal(plain[2], guarded[2])
