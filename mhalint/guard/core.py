"""The guard's machinery: installing and restoring the wrappers, finding the user's call site, running the checks
around the original call, and delivering reports (warn or raise) to the active guards.

Importing this module imports torch; `mhalint.guard.guard()` imports it only when a guard is created.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import os
import sys
import threading
import warnings
from dataclasses import dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

import mhalint

from . import apis
from .reports import AttentionGuardError, AttentionGuardWarning, Report, Site

# -------------------------------------------------------------------------------------------- sessions

_lock = threading.RLock()
_active: list[Session] = []  # the guards now active, innermost last; wrappers are installed while non-empty
_local = threading.local()  # .busy: this thread is running the guard's own checks


@dataclass
class Entry:
    """Everything seen for one (code, site): the first report and how many calls showed it."""

    report: Report
    count: int = 1


class Session:
    """What one active guard has seen: counts per (code, site), the warnings it issued, the calls it checked."""

    def __init__(self, mode: str):
        self.mode = mode
        self.entries: dict[tuple[str, Site], Entry] = {}
        self.warned: set[tuple[str, Site]] = set()
        self.calls = 0

    def add(self, report: Report) -> None:
        key = (report.code, report.site)
        entry = self.entries.get(key)
        if entry is None:
            self.entries[key] = Entry(report)
        else:
            entry.count += 1

    def reports(self) -> list[Entry]:
        return sorted(self.entries.values(), key=lambda e: (e.report.code, e.report.site.filename,
                                                            e.report.site.lineno))


class Guard(contextlib.ContextDecorator):
    """`with mhalint.guard(): ...`: checks attention calls while active. Nested and reentrant use is safe: the
    wrappers are installed by the first active guard and restored when the last one exits (also on exceptions).
    Reports go to every active guard; the innermost one decides whether to warn (once per code and site) or
    raise. After exit, `reports()` still lists what was seen."""

    def __init__(self, mode: str = "warn"):
        self.mode = mode
        self.session: Session | None = None
        self._stack: list[Session] = []

    def __enter__(self) -> Guard:
        session = Session(self.mode)
        with _lock:
            if not _active:
                _install()
            _active.append(session)
        self._stack.append(session)
        self.session = session
        return self

    def __exit__(self, *exc_info) -> bool:
        session = self._stack.pop()
        with _lock:
            for i in range(len(_active) - 1, -1, -1):
                if _active[i] is session:
                    del _active[i]
                    break
            if not _active:
                _uninstall()
        return False

    def reports(self) -> list[Entry]:
        """(report, count) entries of the latest (or current) activation, sorted by code and site."""
        return self.session.reports() if self.session is not None else []

    @property
    def calls(self) -> int:
        return self.session.calls if self.session is not None else 0


def active() -> bool:
    return bool(_active)


# -------------------------------------------------------------------------------------------- call sites

_MACHINERY, _INTERNAL, _TORCH, _USER = range(4)
_TORCH_DIR = os.path.join(os.path.abspath(os.path.dirname(torch.__file__)), "")
_MHALINT_DIR = os.path.join(os.path.abspath(os.path.dirname(mhalint.__file__)), "")
_GUARD_DIR = os.path.join(os.path.abspath(os.path.dirname(__file__)), "")
# nn.Module.__call__ sits between a module call and its forward.
_MACHINERY_FILES = {os.path.join(_TORCH_DIR, "nn", "modules", "module.py")}
# The files where torch's attention stack calls itself: a Transformer layer calling MultiheadAttention, which calls
# F.multi_head_attention_forward, which calls SDPA. Such calls were checked at the outer call and pass through.
_INTERNAL_FILES = {os.path.join(_TORCH_DIR, *parts) for parts in
                   (("nn", "modules", "activation.py"), ("nn", "modules", "transformer.py"), ("nn", "functional.py"))}
_kinds: dict = {}


def _kind(code) -> int:
    kind = _kinds.get(code)
    if kind is None:
        filename = code.co_filename
        path = os.path.abspath(filename) if not filename.startswith("<") else filename
        if path in _MACHINERY_FILES or path.startswith(_GUARD_DIR):
            kind = _MACHINERY
        elif path in _INTERNAL_FILES:
            kind = _INTERNAL
        elif path.startswith(_TORCH_DIR) or path.startswith(_MHALINT_DIR):
            kind = _TORCH
        else:
            kind = _USER
        if len(_kinds) > 50_000:
            _kinds.clear()
        _kinds[code] = kind
    return kind


def _call_site(frame):
    """(the site, its frame) of the user's own frame (first outside torch and mhalint) for a call made from
    `frame`; None for a call that torch's attention stack makes internally."""
    while frame is not None and _kind(frame.f_code) == _MACHINERY:
        frame = frame.f_back
    if frame is None:
        return Site("<unknown>", 0), None
    if _kind(frame.f_code) == _INTERNAL:
        return None
    first = frame
    while frame is not None and _kind(frame.f_code) != _USER:
        frame = frame.f_back
    frame = frame or first
    return Site(frame.f_code.co_filename, frame.f_lineno), frame


# -------------------------------------------------------------------------------------------- wrappers

@dataclass
class _Target:
    owner: object  # the class or module whose attribute is replaced
    attribute: str
    describe: object  # apis.describe_* for this entry point
    names: tuple[str, ...]  # positional parameter names (with "self" for methods)
    defaults: dict
    original: object = None
    wrapper: object = None


def _signature(function) -> tuple[tuple[str, ...], dict]:
    parameters = inspect.signature(function).parameters.values()
    names = tuple(p.name for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))
    defaults = {p.name: p.default for p in parameters if p.default is not p.empty}
    return names, defaults


# F.scaled_dot_product_attention is a builtin without a signature (docs/torch-facts.md#positional-order).
_SDPA_NAMES = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal")
_SDPA_DEFAULTS = {"attn_mask": None, "dropout_p": 0.0, "is_causal": False, "scale": None, "enable_gqa": False}


def _targets() -> list[_Target]:
    targets = []
    for cls, describe in ((nn.MultiheadAttention, apis.describe_mha),
                          (nn.TransformerEncoderLayer, apis.describe_encoder_layer),
                          (nn.TransformerEncoder, apis.describe_encoder),
                          (nn.TransformerDecoderLayer, apis.describe_decoder_layer),
                          (nn.TransformerDecoder, apis.describe_decoder),
                          (nn.Transformer, apis.describe_transformer)):
        targets.append(_Target(cls, "forward", describe, *_signature(cls.__dict__["forward"])))
    targets.append(_Target(F, "multi_head_attention_forward", apis.describe_mha_fn,
                           *_signature(F.multi_head_attention_forward)))
    targets.append(_Target(F, "scaled_dot_product_attention", apis.describe_sdpa, _SDPA_NAMES, _SDPA_DEFAULTS))
    flex = _flex_module()
    if flex is not None:
        # The module attribute, which `from torch.nn.attention.flex_attention import flex_attention` reads: a name
        # bound that way before the guard started keeps the original function and is not seen.
        targets.append(_Target(flex, "flex_attention", apis.describe_flex, *_signature(flex.flex_attention)))
    return targets


def _flex_module():
    """torch.nn.attention.flex_attention (imported here: about 10 ms), or None in a torch without it."""
    try:
        import torch.nn.attention.flex_attention as flex
    except Exception:  # an older torch, or a build without it
        return None
    function = getattr(flex, "flex_attention", None)
    if not callable(function):
        return None
    try:
        _signature(function)
    except (TypeError, ValueError):
        return None
    return flex


_installed: list[_Target] = []


def _install() -> None:
    for target in _targets():
        target.original = getattr(target.owner, target.attribute)
        target.wrapper = _make_wrapper(target)
        setattr(target.owner, target.attribute, target.wrapper)
        _installed.append(target)


def _uninstall() -> None:
    while _installed:
        target = _installed.pop()
        # Someone may have wrapped our wrapper meanwhile: then leave theirs in place (ours passes calls straight
        # through once no guard is active).
        if getattr(target.owner, target.attribute, None) is target.wrapper:
            setattr(target.owner, target.attribute, target.original)


def _compiling() -> bool:
    return torch.compiler.is_compiling() or torch.jit.is_tracing()


def _make_wrapper(target: _Target):
    original = target.original

    @functools.wraps(original)
    def wrapper(*args, **kwargs):
        __tracebackhide__ = True  # pytest: a failure points at the user's call, not at the guard's frames
        if not _active or getattr(_local, "busy", False) or _compiling():
            return original(*args, **kwargs)
        found = _call_site(sys._getframe(1))
        if found is None:
            return original(*args, **kwargs)
        return _guarded_call(target, original, *found, args, kwargs)

    return wrapper


class _Bound(dict):
    """A call's arguments by parameter name; a missing one (the call will raise by itself) reads as None."""

    def __missing__(self, key):
        return None


def _guarded_call(target: _Target, original, site: Site, frame, args, kwargs):
    __tracebackhide__ = True
    call = None
    for session in list(_active):
        session.calls += 1
    _local.busy = True
    try:
        bound = _Bound(target.defaults)
        bound.update(zip(target.names, args))
        bound.update(kwargs)
        call = target.describe(site, bound)
        call.frame = frame
    except Exception as error:  # a guard bug must never break the user's call
        _internal_error(target, error)
    finally:
        _local.busy = False
    try:
        result = original(*args, **kwargs)
    except Exception as error:
        if call is not None:
            call.error = error
            _deliver(_finish(target, call), raised=error)
        raise
    if call is not None:
        call.output = result[call.output_index] if call.output_index is not None and isinstance(result, tuple) \
            else result
        _deliver(_finish(target, call))
    return result


def _finish(target: _Target, call: apis.CallInfo) -> list[Report]:
    """Run every rule's runtime check on the call, read their flags at once, then write the messages of the flags
    that are set."""
    _local.busy = True
    try:
        with torch.no_grad():  # the checks' reads must not record autograd history
            pending = []
            for code, name, check in _checks():
                try:
                    pending += [(code, name, item) for item in check(call)]
                except Exception as error:  # one rule's bug (a plugin's, say) must not hide the others' reports
                    _internal_error(target, error)
            return _reports(call, pending)
    except Exception as error:  # a guard bug must never break the user's call
        _internal_error(target, error)
        return []
    finally:
        _local.busy = False


@functools.cache
def _checks() -> tuple[tuple[str, str, object], ...]:
    """(code, name, guard hook) of every loaded rule that has a runtime check, in code order; the rules are the
    ones the static linter loads, plugins included."""
    from mhalint.rule import load_rules

    return tuple((code, rule.name, rule.guard) for code, rule in load_rules().items() if rule.guard is not None)


def _reports(call: apis.CallInfo, pending: list) -> list[Report]:
    values = _read_flags([item.flag for _, _, item in pending])
    reports = []
    for (code, name, item), value in zip(pending, values):  # in code order: a message may see what came before
        if not value:
            continue
        message = item.message()
        if message:
            call.reported.add(code)
            reports.append(Report(code, call.site, call.api, message, name))
    return reports


def _read_flags(flags: list) -> list[bool]:
    """Python bools for a list of bools and 0-dim tensors, with one transfer per device."""
    values: list = list(flags)
    by_device: dict = {}
    for i, flag in enumerate(flags):
        if isinstance(flag, torch.Tensor):
            by_device.setdefault(flag.device, []).append(i)
    for indices in by_device.values():
        read = torch.stack([flags[i].reshape(()) for i in indices]).tolist()
        for i, value in zip(indices, read):
            values[i] = value
    return [bool(v) for v in values]


_internal_errors: set = set()


def _internal_error(target: _Target, error: Exception) -> None:
    key = (target.attribute, getattr(target.owner, "__name__", ""), type(error).__name__)
    if key in _internal_errors:
        return
    _internal_errors.add(key)
    warnings.warn(f"mhalint guard could not check a call of {getattr(target.owner, '__name__', '')}."
                  f"{target.attribute} ({type(error).__name__}: {error}); the call ran unchecked", RuntimeWarning,
                  stacklevel=2)


# -------------------------------------------------------------------------------------------- delivery

def _deliver(reports: list[Report], raised: BaseException | None = None) -> None:
    __tracebackhide__ = True
    if not reports:
        return
    with _lock:
        sessions = list(_active)
        for session in sessions:
            for report in reports:
                session.add(report)
        innermost = sessions[-1] if sessions else None
        fresh = []
        for report in reports:
            key = (report.code, report.site)
            if innermost is not None and key not in innermost.warned:
                fresh.append(report)
                if innermost.mode != "error":
                    for session in sessions:
                        session.warned.add(key)
    if raised is not None:
        # torch raised on this call: its exception goes on, with what the guard saw as notes.
        for report in reports:
            _add_note(raised, f"mhalint guard: {report.text()}")
        if innermost is not None and innermost.mode == "error":
            return
    elif innermost is not None and innermost.mode == "error":
        first = reports[0]
        error = AttentionGuardError(first.code, str(first.site), first.message)
        for report in reports[1:]:
            _add_note(error, f"mhalint guard: {report.text()}")
        raise error
    for report in fresh:
        warnings.warn_explicit(AttentionGuardWarning(report.code, str(report.site), report.message),
                               AttentionGuardWarning, report.site.filename, report.site.lineno,
                               module=_module_name(report.site.filename))


def _add_note(error: BaseException, text: str) -> None:
    if hasattr(error, "add_note"):  # Python 3.11+; on 3.10 the warning (warn mode) is the only trace
        error.add_note(text)


def _module_name(filename: str) -> str:
    base = os.path.basename(filename)
    return base[:-3] if base.endswith(".py") else base
