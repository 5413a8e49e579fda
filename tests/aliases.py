"""The spellings through which facts sheet section 9.1 says torch's attention modules can be reached, shared
by the per-rule tests."""

from __future__ import annotations


def spellings(cls: str) -> list[tuple[str, str]]:
    """(import line, callee expression) for every way facts 9.1 says `cls` can be reached."""
    forms = [
        ("import torch", f"torch.nn.{cls}"),
        ("import torch.nn as nn", f"nn.{cls}"),
        ("from torch import nn", f"nn.{cls}"),
        (f"from torch.nn import {cls}", cls),
        (f"from torch.nn import {cls} as Alias", "Alias"),
    ]
    if cls == "MultiheadAttention":
        forms += [
            ("import torch", "torch.nn.modules.activation.MultiheadAttention"),
            ("import torch", "torch.nn.modules.transformer.MultiheadAttention"),
            ("import torch.nn.modules.activation as act", "act.MultiheadAttention"),
            ("from torch.nn import modules", "modules.MultiheadAttention"),
            ("import torch", "torch.nn.quantizable.MultiheadAttention"),
            ("import torch", "torch.ao.nn.quantizable.MultiheadAttention"),
            ("from torch.ao.nn.quantizable import MultiheadAttention", "MultiheadAttention"),
        ]
    else:
        forms += [("import torch", f"torch.nn.modules.transformer.{cls}"),
                  (f"from torch.nn.modules import {cls}", cls), ("from torch import nn as tnn", f"tnn.{cls}")]
    return forms
