"""The one vocabulary of axis names: what `B`, `bsz`, `seq_len`, `HxW`, `d_model` say an axis holds.

Names are read as a group (the names of one tensor's axes, in order), because a letter's meaning depends on its
neighbours: in `N, L, E` N is the batch, in einops' `b n d` n is the sequence of tokens.
"""

from __future__ import annotations

import re

from mhalint.analysis.axes import Role

_BATCH = re.compile(r"^_?(b|bs|bsz|bz|batch|batches|batch_size|batchsize|n_batch|nbatch|num_batch|nb|n_samples)$", re.I)
_SEQUENCE = re.compile(r"^_?(l|t|s|seq|seqlen|seq_len|seq_length|sequence|sequence_length|len|length|tgt_len|"
                       r"src_len|q_len|k_len|kv_len|len_q|len_k|len_v|len_kv|len_in|q|k|nq|num_queries|n_queries|n_q|time|n_tokens|num_tokens|"
                       r"tokens|n_ctx|ctx|hw|h\*w|h_w|hxw|num_patches|n_patches|patches)$", re.I)
_EMBEDDING = re.compile(r"^_?(c|e|d|dim|d_model|dmodel|embed_dim|emb_dim|emb|embed|embedding|hidden|hidden_dim|"
                        r"hidden_size|channels|ch|feat|feats|features|n_embd|d_embed|model_dim|width_dim)$", re.I)
_HEADS = re.compile(r"^_?(nh|n_?heads?|nb_?heads?|num_?heads?|number_of_heads|num_attention_heads|num_attn_heads|"
                    r"n_attn_heads|attn_heads|attention_heads|heads)$", re.I)
_SPATIAL = re.compile(r"^_?(h|w|height|width|x|y|z)\d?$", re.I)
_PLANE = re.compile(r"^(h|w|height|width)\d?$", re.I)  # h and w, also as split in einops: `(h1 h2)`


def roles_of_names(names: list[str]) -> list[Role]:
    """The role each name gives its axis, read together; UNKNOWN for a name that says nothing."""
    words = [name.strip() for name in names]
    roles = [_role(word) for word in words]
    has_batch = Role.BATCH in roles
    spatial_pair = sum(1 for word in words if _PLANE.match(word)) >= 2
    for position, word in enumerate(words):
        lower = word.lower()
        if lower == "n":  # the batch in N, L, E; the tokens in einops' b n d
            roles[position] = Role.SEQUENCE if has_batch else (
                Role.BATCH if Role.SEQUENCE in roles or Role.EMBEDDING in roles else Role.UNKNOWN)
        elif _PLANE.match(lower):
            roles[position] = Role.SPATIAL if spatial_pair else (Role.HEADS if lower == "h" and has_batch
                                                                 else Role.UNKNOWN)
        elif _is_product_of_spatial(word):
            roles[position] = Role.SEQUENCE
    return roles


def role_of_size_name(name: str) -> Role:
    """The role a size's name alone suggests (`bsz`, `seq_len`): weaker than a group, and never a spatial axis."""
    role = _role(name)
    return role if role is not Role.SPATIAL else Role.UNKNOWN


def is_head_count(name: str) -> bool:
    """`num_heads`, `self.nhead`, `n_attn_heads`: a name that says it counts attention heads."""
    return bool(_HEADS.match(name))


def names_head_count(code: str) -> bool:
    """Is a size written as a name or a dotted name whose last part counts heads (`self.n_head`, `num_heads`)?"""
    parts = code.split(".")
    return all(part.isidentifier() for part in parts) and is_head_count(parts[-1])


def _role(word: str) -> Role:
    word = word.strip()
    for pattern, role in ((_BATCH, Role.BATCH), (_SEQUENCE, Role.SEQUENCE), (_EMBEDDING, Role.EMBEDDING),
                          (_HEADS, Role.HEADS), (_SPATIAL, Role.SPATIAL)):
        if pattern.match(word):
            return role
    return Role.UNKNOWN


_FACTOR_BREAKS = re.compile(r"[\s*x×()]+")


def _is_product_of_spatial(word: str) -> bool:
    """`H*W`, `HxW`, `(h w)`, `h w`: flattened positions, a sequence."""
    parts = [part for part in _FACTOR_BREAKS.split(word.strip()) if part]
    return len(parts) >= 2 and all(_SPATIAL.match(part) for part in parts)
