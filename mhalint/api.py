"""What a rule needs, in one import: `from mhalint.api import Rule, Valid, Invalid, Message, Severity, cst, ...`.

The plugin API stays where it was (`mhalint.rule`, `mhalint.finding`, `mhalint.fixes`): this module gathers it
with the analyses the built-in rules ask, so that a rule written outside mhalint has one place to import from.
Importing it loads neither libcst (`cst` is loaded when first used) nor torch.
"""

from mhalint import torchapi
from mhalint.analysis.calls import call_target, construction, mask_arguments, module_calls, wrapping_chain
from mhalint.analysis.masks import Mask, MaskReader
from mhalint.analysis.tensors import ShapeReader
from mhalint.analysis.values import Value, resolve
from mhalint.context import ModuleContext, Scope
from mhalint.finding import (
    CONFIRMED,
    NOT_CONFIRMED,
    REPRODUCED,
    SAFE,
    SKIPPED,
    UNSAFE,
    Edit,
    Finding,
    Fix,
    Severity,
)
from mhalint.fixes import apply_fixes
from mhalint.parse.lazy import cst
from mhalint.rule import Invalid, Message, Rule, Valid

__all__ = [
    "CONFIRMED", "NOT_CONFIRMED", "REPRODUCED", "SAFE", "SKIPPED", "UNSAFE", "Edit", "Finding", "Fix", "Invalid",
    "Mask", "MaskReader", "Message", "ModuleContext", "Rule", "Scope", "Severity", "ShapeReader", "Valid", "Value",
    "apply_fixes", "call_target", "construction", "cst", "mask_arguments", "module_calls", "resolve", "torchapi",
    "wrapping_chain",
]
