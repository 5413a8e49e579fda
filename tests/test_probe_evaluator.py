"""The probe's mask evaluator: rebuilds masks from source text, and refuses anything outside its small whitelist."""

from __future__ import annotations

import ast
import builtins

import pytest

torch = pytest.importorskip("torch")

from mhalint.probe.evaluator import MAX_DEPTH, MAX_NODES, Refused, evaluate_mask  # noqa: E402

L, S, N = 5, 7, 2
SIZES = {"L": L, "S": S, "N": N}


def evaluate(expression: str):
    return evaluate_mask(expression, torch, SIZES)


def refusal(expression: str) -> str:
    with pytest.raises(Refused) as caught:
        evaluate(expression)
    message = str(caught.value)
    assert message and "\n" not in message
    return message


# ---- reconstruction -----------------------------------------------------------------------------------------------
EQUIVALENTS = [
    ("torch.triu(torch.ones(L, L), diagonal=1).bool()", torch.triu(torch.ones(L, L), diagonal=1).bool()),
    ("torch.tril(torch.ones(L, L, dtype=torch.bool))", torch.tril(torch.ones(L, L, dtype=torch.bool))),
    ("torch.ones(L, L, dtype=torch.bool).triu(1)", torch.ones(L, L, dtype=torch.bool).triu(1)),
    ("~torch.tril(torch.ones(L, L, dtype=torch.bool))", ~torch.tril(torch.ones(L, L, dtype=torch.bool))),
    ("torch.arange(S)[None, :] < 3", torch.arange(S)[None, :] < 3),
    ("torch.arange(S).unsqueeze(0).expand(N, S) >= 4", torch.arange(S).unsqueeze(0).expand(N, S) >= 4),
    ("torch.full((L, S), float('-inf')).triu(1)", torch.full((L, S), float("-inf")).triu(1)),
    ("torch.zeros(L, S).masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float('-inf'))",
     torch.zeros(L, S).masked_fill(torch.ones(L, S, dtype=torch.bool).triu(1), float("-inf"))),
    ("torch.triu(torch.ones(L, L)).transpose(0, 1).float().masked_fill(torch.eye(L) == 0, value=-1e9)",
     torch.triu(torch.ones(L, L)).transpose(0, 1).float().masked_fill(torch.eye(L) == 0, value=-1e9)),
    ("torch.where(torch.arange(L)[:, None] >= torch.arange(S), 0.0, float('-inf'))",
     torch.where(torch.arange(L)[:, None] >= torch.arange(S), 0.0, float("-inf"))),
    ("torch.logical_not(torch.tril(torch.ones(L, L)).bool())", torch.logical_not(torch.tril(torch.ones(L, L)).bool())),
    ("(torch.ones(L, L).tril() == 0) | (torch.eye(L, dtype=torch.bool) & False)",
     (torch.ones(L, L).tril() == 0) | (torch.eye(L, dtype=torch.bool) & False)),
    ("torch.zeros(N, S, dtype=torch.bool)[:, S - 2:].logical_not().repeat_interleave(2, dim=0)",
     torch.zeros(N, S, dtype=torch.bool)[:, S - 2:].logical_not().repeat_interleave(2, dim=0)),
    ("torch.ones([L, L]).tril().view(1, L, L).repeat(N, 1, 1)[..., -1].long() * 2 // 1",
     torch.ones([L, L]).tril().view(1, L, L).repeat(N, 1, 1)[..., -1].long() * 2 // 1),
    ("(1.0 - torch.tril(torch.ones(L, L))) * -10000.0 / 2", (1.0 - torch.tril(torch.ones(L, L))) * -10000.0 / 2),
    ("torch.ones_like(torch.eye(L)).ne(0).t().contiguous().clone().detach()",
     torch.ones_like(torch.eye(L)).ne(0).t().contiguous().clone().detach()),
]


@pytest.mark.parametrize(("expression", "expected"), EQUIVALENTS, ids=[e for e, _ in EQUIVALENTS])
def test_reconstructs_the_mask_torch_builds(expression, expected):
    result = evaluate(expression)
    assert result.dtype == expected.dtype
    assert torch.equal(result, expected)


def test_device_keywords_are_ignored_and_everything_runs_on_cpu():
    assert evaluate("torch.ones(L, L, device='cuda', dtype=torch.bool).triu(1)").device.type == "cpu"
    assert evaluate("torch.ones(L, L).to(dtype=torch.bool, device=q.device, non_blocking=True)").dtype == torch.bool


def test_surrounding_whitespace_and_line_breaks_inside_brackets_are_fine():
    assert evaluate("  torch.triu(\n        torch.ones(L, L), diagonal=1\n    ).bool()\n").shape == (L, L)


# ---- refusals -----------------------------------------------------------------------------------------------------
REFUSED = [
    ("__import__('os').system('x')", "`__import__` is not an allowed function"),
    ("open('f')", "`open` is not an allowed function"),
    ("eval('1')", "`eval` is not an allowed function"),
    ("torch.load('x')", "`torch.load` is not an allowed function"),
    ("torch.save(torch.ones(2), 'x')", "`torch.save` is not an allowed function"),
    ("torch.nn.functional.pad(torch.ones(2), (1, 1))", "attribute `torch.nn.functional` is not allowed"),
    ("(lambda: 1)()", "a lambda"),
    ("[i for i in range(3)]", "a comprehension"),
    ("x.__class__", "dunder attribute `__class__`"),
    ("().__class__.__bases__", "dunder attribute `__bases__`"),
    ("torch.ones(L)._version", "attribute `_version`"),
    ("getattr(torch, 'load')", "`getattr` is not an allowed function"),
    ("tokens == 0", "name `tokens` is unknown (only sizes L, S, N and torch are bound)"),
    ("torch.ones(L) == 'a'", "str constant `'a'`"),
    ("f'{L}'", "an f-string"),
    ("torch.ones(*[L])", "`*` unpacking"),
    ("torch.ones(L, **{'dtype': torch.bool})", "`**` unpacking"),
    ("torch.ones(L, out=L)", "keyword `out=`"),
    ("torch.ones(L).numpy()", "`.numpy()` is not an allowed tensor method"),
    ("torch.ones(L).T", "attribute `torch.ones(L).T`"),
    ("L.bit_length()", "`.bit_length()` needs a tensor"),
    ("torch.ones(L).to('cuda')", "str constant `'cuda'`"),
    ("torch.ones(L).to(torch.ones(L))", ".to() may only take a dtype"),
    ("torch", "`torch` may only be used as `torch.<function or dtype>`"),
    ("torch.ones", "`torch.ones` may only be called"),
    ("float('1e5')", "float() takes only"),
    ("not torch.ones(L)", "operator `not`"),
    ("torch.ones(L) ** 2", "operator `**`"),
    ("torch.ones(L) @ torch.ones(L)", "operator `@`"),
    ("1 < torch.ones(L) < 3", "chained comparison"),
    ("torch.ones(L) if L else torch.zeros(L)", "a conditional"),
    ("torch.ones(L)[torch.ones(L).bool()]", "may hold only ints, slices, None and ..."),
    ("torch.ones(L)[1.5]", "may hold only ints"),
    ("L + 1", "gives int, not a tensor"),
    ("torch.ones(", "does not parse"),
    ("\0", "does not parse"),
    ("torch.ones(-1)", "`torch.ones(-1)`: size -1 is negative"),
    ("torch.ones(1.5)", "a size is a float, not an int"),
    ("torch.full((L, -S), 0.0)", "size -7 is negative"),
    ("torch.arange(0, 10, 0)", "non-zero step"),
    ("torch.ones(1000000000)", "1,000,000,000 elements (limit 1,000,000)"),
    ("torch.zeros((100000, 100000), dtype=torch.bool)", "10,000,000,000 elements"),
    ("torch.arange(0, 10000000)", "10,000,000 elements"),
    ("torch.eye(10000)", "100,000,000 elements"),
    ("torch.ones(1000).expand(1000, 1001)", "1,001,000 elements"),
    ("torch.ones(1000).repeat(1000, 2)", "2,000,000 elements"),
    ("torch.ones(1000).repeat_interleave(10000)", "10,000,000 elements"),
    ("torch.ones(1000, 1, 1) + torch.ones(1, 1000, 1000)", "1,000,000,000 elements"),
    ("torch.arange(1000)[:, None, None] < torch.arange(1000)[None, :, None] * torch.arange(1000)",
     "1,000,000,000 elements"),
    ("torch.ones(1000, 1, 1).masked_fill(torch.ones(1, 1000, 1000).bool(), 0)", "1,000,000,000 elements"),
    ("(0,) * 1000000000", "`(0,)` is not a tensor or a number but a tuple"),
    ("1 << 1000000000", "operator `<<`"),
]


@pytest.mark.parametrize(("expression", "reason"), REFUSED, ids=[e[:60] for e, _ in REFUSED])
def test_refuses_with_a_reason_naming_the_piece(expression, reason):
    assert reason in refusal(expression)


def test_power_is_refused_before_anything_is_allocated(monkeypatch):
    def boom(*args, **kwargs):
        raise AssertionError("torch.ones ran")

    monkeypatch.setattr(torch, "ones", boom)  # raises if anything reached torch
    assert "operator `**`" in refusal("torch.ones(10**9)")
    assert "elements (limit" in refusal("torch.ones(1000000000)")
    assert "elements (limit" in refusal("torch.ones(100000, 100000)")


def test_node_count_limit():
    expression = " + ".join(["torch.ones(L)"] * 60)
    assert sum(1 for _ in ast.walk(ast.parse(expression, mode="eval"))) >= 500
    assert f"AST nodes (limit {MAX_NODES})" in refusal(expression)


def test_nesting_limit():
    assert f"levels deep (limit {MAX_DEPTH})" in refusal("-" * (MAX_DEPTH + 1) + "torch.ones(L)")
    assert "nests too deeply to parse" in refusal("-" * 200_000 + "1")
    assert evaluate("(" * 40 + "torch.ones(L)" + ")" * 40).shape == (L,)  # parentheses are not nodes


def test_unknown_name_without_sizes_says_only_torch_is_bound():
    with pytest.raises(Refused, match=r"name `L` is unknown \(only torch are bound\)"):
        evaluate_mask("torch.ones(L)", torch, {})


def test_sizes_must_be_ints_under_plain_names():
    with pytest.raises(ValueError):
        evaluate_mask("torch.ones(L)", torch, {"L": 2.0})
    with pytest.raises(ValueError):
        evaluate_mask("torch.ones(2)", torch, {"torch": 2})


def test_torch_errors_about_the_expression_propagate_unchanged():
    with pytest.raises(RuntimeError):
        evaluate("torch.ones(L, L) & torch.ones(S, S).bool()")


def test_never_calls_eval_exec_or_compile_to_code(monkeypatch):
    """ast.parse itself calls compile() with PyCF_ONLY_AST, which builds a tree and no code; anything else fails."""
    real_compile = builtins.compile

    def forbidden(name):
        def call(*args, **kwargs):
            raise AssertionError(f"{name} was called")
        return call

    def ast_only(source, filename, mode, flags=0, *args, **kwargs):
        if not flags & ast.PyCF_ONLY_AST:
            raise AssertionError("compile() was asked for code")
        return real_compile(source, filename, mode, flags, *args, **kwargs)

    for expression, _ in EQUIVALENTS:  # torch imports some of its modules on first use (an import runs exec):
        evaluate(expression)           # done here, outside the window where the evaluator is watched
    monkeypatch.setattr(builtins, "eval", forbidden("eval"))
    monkeypatch.setattr(builtins, "exec", forbidden("exec"))
    monkeypatch.setattr(builtins, "compile", ast_only)
    for expression, expected in EQUIVALENTS:
        assert torch.equal(evaluate(expression), expected)
    assert "`__import__`" in refusal("__import__('os').system('x')")
