"""The torch 2.13.0 source lines docs/torch-facts.md cites: prints the text of each cited line, so that a changed
torch (or a mistyped line number) shows up as a difference with the doc. Paths are relative to the installed
torch package (`python -c "import torch, os; print(os.path.dirname(torch.__file__))"`).

Reads files only; about 1 s (no torch import).
"""

import importlib.util
import os

ROOT = os.path.dirname(importlib.util.find_spec("torch").origin)
ACTIVATION, FUNCTIONAL, TRANSFORMER = "nn/modules/activation.py", "nn/functional.py", "nn/modules/transformer.py"

# (section anchor, file, line): the first line of each cited range, and the lines a rule's message names.
CITED = [
    ("mha-reference", ACTIVATION, 1162), ("mha-reference", ACTIVATION, 1184), ("mha-reference", ACTIVATION, 1186),
    ("mha-reference", ACTIVATION, 1191), ("mha-reference", ACTIVATION, 1205), ("mha-reference", ACTIVATION, 1207), ("mha-reference", ACTIVATION, 1241),
    ("mha-reference", ACTIVATION, 1255), ("mha-reference", ACTIVATION, 1293), ("mha-reference", ACTIVATION, 1302),
    ("mha-reference", ACTIVATION, 1324),
    ("positional-order", ACTIVATION, 1260), ("positional-order", ACTIVATION, 1261),
    ("positional-order", ACTIVATION, 1262), ("positional-order", FUNCTIONAL, 6651),
    ("positional-order", FUNCTIONAL, 6628), ("positional-order", TRANSFORMER, 408),
    ("positional-order", TRANSFORMER, 418), ("positional-order", TRANSFORMER, 808),
    ("positional-order", "_C/_nn.pyi", 186), ("positional-order", "_C/_nn.pyi", 193),
    ("entry-points", FUNCTIONAL, 6341), ("entry-points", FUNCTIONAL, 6342),
    ("batch-first", ACTIVATION, 1172), ("batch-first", TRANSFORMER, 112), ("batch-first", TRANSFORMER, 749),
    ("batch-first", TRANSFORMER, 1034),
    ("mask-convention", FUNCTIONAL, 6405), ("mask-convention", FUNCTIONAL, 6411), ("mask-convention", FUNCTIONAL, 6465),
    ("mask-convention", ACTIVATION, 1287), ("mask-convention", ACTIVATION, 1297), ("mask-convention", TRANSFORMER, 197),
    ("float-masks-are-additive", ACTIVATION, 1288), ("float-masks-are-additive", ACTIVATION, 1298),
    ("float-masks-are-additive", FUNCTIONAL, 6466), ("float-masks-are-additive", FUNCTIONAL, 6608),
    ("float-masks-are-additive", FUNCTIONAL, 6609), ("float-masks-are-additive", TRANSFORMER, 249),
    ("is-causal-hint", FUNCTIONAL, 6810), ("is-causal-hint", FUNCTIONAL, 6812), ("is-causal-hint", FUNCTIONAL, 6817),
    ("is-causal-hint", FUNCTIONAL, 6821), ("is-causal-hint", FUNCTIONAL, 6836), ("is-causal-hint", FUNCTIONAL, 7027),
    ("is-causal-hint", ACTIVATION, 1433), ("is-causal-hint", ACTIVATION, 1446), ("is-causal-hint", ACTIVATION, 1513),
    ("is-causal-hint", TRANSFORMER, 917), ("is-causal-hint", TRANSFORMER, 937), ("is-causal-hint", TRANSFORMER, 971),
    ("is-causal-hint", TRANSFORMER, 535), ("is-causal-hint", TRANSFORMER, 639), ("is-causal-hint", TRANSFORMER, 1234),
    ("is-causal-hint", TRANSFORMER, 1164), ("is-causal-hint", TRANSFORMER, 1184),
    ("fast-path-conditions", ACTIVATION, 1113), ("fast-path-conditions", ACTIVATION, 1328),
    ("fast-path-conditions", ACTIVATION, 1332), ("fast-path-conditions", ACTIVATION, 1355),
    ("fast-path-conditions", ACTIVATION, 1357), ("fast-path-conditions", ACTIVATION, 1361),
    ("fast-path-conditions", ACTIVATION, 1373), ("fast-path-conditions", ACTIVATION, 1377),
    ("fast-path-conditions", ACTIVATION, 1379), ("fast-path-conditions", ACTIVATION, 1383),
    ("fast-path-conditions", ACTIVATION, 1385), ("fast-path-conditions", ACTIVATION, 1394),
    ("fast-path-conditions", ACTIVATION, 1410), ("fast-path-conditions", ACTIVATION, 1417),
    ("fast-path-conditions", ACTIVATION, 1432), ("fast-path-conditions", ACTIVATION, 1449),
    ("fast-path-conditions", ACTIVATION, 1467), ("fast-path-conditions", TRANSFORMER, 711),
    ("fast-path-conditions", TRANSFORMER, 836), ("fast-path-conditions", TRANSFORMER, 847),
    ("fast-path-conditions", TRANSFORMER, 849), ("fast-path-conditions", TRANSFORMER, 851),
    ("fast-path-conditions", TRANSFORMER, 855), ("fast-path-conditions", TRANSFORMER, 867),
    ("fast-path-conditions", TRANSFORMER, 872), ("fast-path-conditions", TRANSFORMER, 372),
    ("fast-path-conditions", TRANSFORMER, 398), ("fast-path-conditions", "backends/mha/__init__.py", 22),
    ("odd-heads-fast-path", ACTIVATION, 1375), ("odd-heads-fast-path", ACTIVATION, 1376),
    ("odd-heads-fast-path", TRANSFORMER, 863), ("odd-heads-fast-path", TRANSFORMER, 864),
    ("odd-heads-fast-path", TRANSFORMER, 395), ("odd-heads-fast-path", TRANSFORMER, 396),
    ("heads-dividing", ACTIVATION, 1176), ("heads-dividing", ACTIVATION, 1177), ("heads-dividing", ACTIVATION, 1192),
    ("heads-dividing", ACTIVATION, 1193), ("heads-dividing", TRANSFORMER, 757), ("heads-dividing", TRANSFORMER, 1042),
    ("heads-dividing", TRANSFORMER, 125), ("heads-dividing", TRANSFORMER, 150),
    ("mask-repeat-layout", FUNCTIONAL, 6913), ("mask-repeat-layout", FUNCTIONAL, 7005),
    ("mask-repeat-layout", FUNCTIONAL, 7006), ("mask-repeat-layout", FUNCTIONAL, 7008),
    ("mask-repeat-layout", FUNCTIONAL, 7013), ("mask-repeat-layout", FUNCTIONAL, 7068),
    ("need-weights", ACTIVATION, 1290), ("need-weights", FUNCTIONAL, 6687), ("need-weights", FUNCTIONAL, 6688),
    ("need-weights", FUNCTIONAL, 7023), ("need-weights", FUNCTIONAL, 7031), ("need-weights", FUNCTIONAL, 7038),
    ("need-weights", FUNCTIONAL, 7053), ("need-weights", FUNCTIONAL, 7060), ("need-weights", FUNCTIONAL, 7077),
    ("sdpa-causal-and-mask", FUNCTIONAL, 6358), ("sdpa-causal-and-mask", FUNCTIONAL, 6359),
    ("sdpa-causal-and-mask", FUNCTIONAL, 6468), ("sdpa-causal-and-mask", FUNCTIONAL, 6471),
    ("fully-masked-rows", FUNCTIONAL, 6375), ("fully-masked-rows", FUNCTIONAL, 7038),
    ("fully-masked-rows", TRANSFORMER, 1165), ("fully-masked-rows", TRANSFORMER, 1185),
    ("fully-masked-rows", TRANSFORMER, 529),
    ("sdpa-padding-broadcast", FUNCTIONAL, 6463), ("sdpa-padding-broadcast", FUNCTIONAL, 6464),
    ("dropout", FUNCTIONAL, 6383), ("dropout", FUNCTIONAL, 6398), ("dropout", FUNCTIONAL, 7016),
    ("dropout", FUNCTIONAL, 7017), ("dropout", ACTIVATION, 1482),
    ("warnings-and-errors", FUNCTIONAL, 6598), ("warnings-and-errors", FUNCTIONAL, 6603),
    ("warnings-and-errors", FUNCTIONAL, 6604), ("warnings-and-errors", FUNCTIONAL, 6802),
    ("warnings-and-errors", FUNCTIONAL, 6909), ("warnings-and-errors", ACTIVATION, 1336),
    ("warnings-and-errors", TRANSFORMER, 400), ("warnings-and-errors", TRANSFORMER, 429),
    ("warnings-and-errors", TRANSFORMER, 819),
]

cache = {}
for anchor, path, line in CITED:
    if path not in cache:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            cache[path] = f.read().splitlines()
    print(f"FACT {anchor} {path}:{line} = {cache[path][line - 1].strip()}")
