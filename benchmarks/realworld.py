"""Precision and recall of mhalint on labelled real code.

Usage:
    python benchmarks/realworld.py LABELS.jsonl [--root-dir DIR]

The labels file is JSON Lines: one object per line (blank lines are skipped), each labelling one call site of a
PyTorch attention API in a public repository. Fields:

    repo      "owner/name" of the GitHub repository
    commit    the full (40 hex digit) commit the label was written against
    path      the file, relative to the repository root
    line      the call's first line (matched with a slack of SLACK lines, for multi-line calls)
    api       the API called there, e.g. "MultiheadAttention", "scaled_dot_product_attention" (informative)
    rule      the pitfall: a key of CODES below (R1, R2, R3, R4, divisible, mask_layout, need_weights, nan)
    verdict   "bug" (the pitfall corrupts results here), "risky" (a default left implicit while the layout is
              handled correctly, or a true performance finding), "ok" (correct: a finding here is a false
              positive) or "unknown" (not scored)
    reason    why, in words (informative)
    optional: "root" (the directory of the extracted tree, overriding --root-dir), "decoy": true (a project
              class that only shares a torch name), "issue", "pr", "fix_commit" (informative)

For example:
    {"repo": "owner/name", "commit": "<40 hex>", "path": "model.py", "line": 42, "api": "MultiheadAttention",
     "rule": "R1", "verdict": "bug", "reason": "batch_first resolves to False while the data is batch-first"}

The label rules map to mhalint codes as CODES says: R1 batch_first left at its default or contradicting the
layout (MHA001); R2 mask convention flipped between MHA and SDPA, or 0/1 float keep masks (MHA002, MHA008);
R3 is_causal without its mask, or SDPA given both (MHA003, MHA009); R4 odd num_heads (MHA004); divisible
embed_dim not divisible by num_heads (MHA005); mask_layout a per-sample mask tiled with .repeat (MHA006);
head_split a head split or merge by one view/reshape that reorders axes (MHA016, benchmarks/handwritten.py);
attention_scale SDPA's scale on a pre-scaled query, or the square root as its scale (MHA017); softmax_axis,
masked_fill and causal_direction, issue 36's families with no rule yet (softmax over another axis than the keys;
a mask filled with the wrong polarity or a fill value that does not mask; a causal mask used the wrong way
round), count as "no-rule" until their rules exist;
need_weights attention weights computed and thrown away (MHA007); nan all-masked rows (the runtime guard, no
static code: such labels count as "no-rule").

The extracted tree of a label is found at `<root-dir>/<owner>+<name>@<commit[:12]>` or, if the label has a
"root" field, there. A label counts as found when a finding of one of its rule's codes lies in the same file
within SLACK lines of the label's line. Scoring (issue 4): `bug` must be found at error severity; `risky` found
at any severity; `ok` must get no finding at warning or above. The script reads the labels only: it contains no
site-specific logic.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
from pathlib import Path

from mhalint.finding import Severity
from mhalint.rule import load_rules
from mhalint.run.engine import Checker

SLACK = 3
CODES = {
    "R1": ("MHA001",), "R2": ("MHA002", "MHA008"), "R3": ("MHA003", "MHA009"), "R4": ("MHA004",),
    "divisible": ("MHA005",), "mask_layout": ("MHA006",), "need_weights": ("MHA007",), "nan": (),
    "dropout": ("MHA011",), "averaged_weights": ("MHA012",), "sdpa_layout": ("MHA013",),
    "padding_mask_shape": ("MHA014",), "flex_mod": ("MHA015",), "head_split": ("MHA016",),
    "attention_scale": ("MHA017",), "masked_fill": ("MHA020",),
    "softmax_axis": (), "causal_direction": (),  # issue 36's families not built yet
}


def tree_of(label: dict, root_dir: Path) -> Path:
    if "root" in label:
        return Path(label["root"])
    owner_name = label["repo"].replace("/", "+")
    return root_dir / f"{owner_name}@{label['commit'][:12]}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("labels", type=Path)
    parser.add_argument("--root-dir", type=Path, default=Path("/tmp/corpus"))
    parser.add_argument("--verbose", action="store_true", help="print every label's outcome")
    options = parser.parse_args(argv)

    labels = [json.loads(line) for line in options.labels.read_text().splitlines() if line.strip()]
    rules = load_rules()
    checker = Checker(list(rules.values()))
    cache: dict[Path, list] = {}
    table: dict[tuple[str, str], collections.Counter] = collections.defaultdict(collections.Counter)
    tiers: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)  # top severity -> verdicts
    misses, false_alarms, over = [], [], []
    for label in labels:
        codes = tuple(c for c in CODES.get(label["rule"], (label["rule"],)) if c in rules)  # or a code itself
        file = tree_of(label, options.root_dir) / label["path"]
        if file not in cache:
            cache[file] = checker.check_source(file.read_bytes(), str(file)) if file.exists() else None
        findings = cache[file]
        where = f"{label['repo']}:{label['path']}:{label['line']} [{label['rule']} {label['verdict']}]"
        if findings is None:
            table[(label["rule"], label["verdict"])]["missing file"] += 1
            continue
        if not codes:
            table[(label["rule"], label["verdict"])]["no-rule"] += 1
            continue
        near = [f for f in findings if f.code in codes and abs(f.line - label["line"]) <= SLACK]
        top = max((f.severity for f in near), default=None)
        outcome = _score(label["verdict"], top)
        table[(label["rule"], label["verdict"])][outcome] += 1
        tiers[str(top) if top is not None else "none"][label["verdict"]] += 1
        detail = f"{where} -> {top if top is not None else 'no finding'}"
        if outcome in ("FN", "TP-low"):
            misses.append(detail)
        elif outcome == "TP-high":
            over.append(detail + ": " + max(near, key=lambda f: f.severity).message[:200])
        elif outcome == "FP":
            false_alarms.append(detail + ": " + near[0].message[:160])
        if options.verbose:
            print(outcome, detail)
    _print_table(table)
    _print_rates(table)
    _print_tiers(tiers)
    _print_unlabelled(labels, cache, rules, options.root_dir)
    for title, rows in (("Misses (not found, or a bug found below error)", misses), ("False alarms", false_alarms),
                        ("Risky sites called errors (the layout is handled there)", over)):
        print(f"\n{title} ({len(rows)}):")
        for row in rows:
            print("  " + row)
    return 0


def _score(verdict: str, top: Severity | None) -> str:
    if verdict == "bug":
        return "TP" if top == Severity.ERROR else ("TP-low" if top is not None else "FN")
    if verdict == "risky":
        return "TP-high" if top == Severity.ERROR else ("TP" if top is not None else "FN")
    if verdict == "ok":
        return "FP" if top is not None and top >= Severity.WARNING else ("TN-info" if top is not None else "TN")
    return "n/a"


def _print_table(table) -> None:
    columns = ("TP", "TP-low", "TP-high", "FN", "TN", "TN-info", "FP", "no-rule", "n/a")
    print(f"{'rule':<18}{'verdict':<9}" + "".join(f"{h:>9}" for h in columns))
    for (rule, verdict), counts in sorted(table.items()):
        cells = [counts[column] for column in columns]
        print(f"{rule:<18}{verdict:<9}" + "".join(f"{c:>9}" for c in cells))


def _print_rates(table) -> None:
    """Per rule: bug and risky labels are the positives; ok labels found at warning or above are false positives.
    Precision counts findings at warning and above (what users see by default)."""
    print("\nPer rule (positives: bug + risky; a finding counts at any severity for recall, at warning+ for "
          "precision):")
    for rule in sorted({rule for rule, _ in table}):
        counts = collections.Counter()
        for (label_rule, verdict), outcomes in table.items():
            if label_rule == rule:
                counts.update(outcomes)
        found = counts["TP"] + counts["TP-low"] + counts["TP-high"]
        positives = found + counts["FN"]
        if not positives and not counts["FP"] and not counts["TN"] + counts["TN-info"]:
            continue
        recall = f"{found / positives:.2f}" if positives else "n/a"
        precision = f"{found / (found + counts['FP']):.2f}" if found + counts["FP"] else "n/a"
        print(f"  {rule:<18} recall {recall:>5} ({found}/{positives})   precision {precision:>5}   "
              f"false positives {counts['FP']}")


def _print_tiers(tiers) -> None:
    print("\nBy the severity of the finding at each label (none = no finding):")
    for tier in ("error", "warning", "info", "none"):
        verdicts = tiers.get(tier, collections.Counter())
        print(f"  {tier:<8} " + "  ".join(f"{v}={verdicts[v]}" for v in ("bug", "risky", "ok", "unknown")))


def _print_unlabelled(labels: list[dict], cache: dict, rules: dict, root_dir: Path) -> None:
    """Per code, the findings (warning and above) in the labelled files that no label of that code covers: what a
    rule says where nobody has looked yet, so that a new rule's noise shows before it has labels of its own."""
    covered = collections.defaultdict(list)  # (file, code) -> labelled lines
    for label in labels:
        for code in CODES.get(label["rule"], (label["rule"],)):
            covered[(label["repo"], label["path"], code)].append(label["line"])
    files = {(label["repo"], label["path"]): tree_of(label, root_dir) / label["path"] for label in labels}
    counts = collections.defaultdict(collections.Counter)
    for (repo, path), file in files.items():
        for finding in cache.get(file) or []:
            if finding.severity >= Severity.WARNING and finding.code in rules and not any(
                    abs(finding.line - line) <= SLACK for line in covered[(repo, path, finding.code)]):
                counts[finding.code][str(finding.severity)] += 1
    print("\nFindings in the labelled files that no label of their code covers (warning and above):")
    for code in sorted(rules):
        if counts[code]:
            print(f"  {code}  error={counts[code]['error']}  warning={counts[code]['warning']}")
    if not counts:
        print("  none")


if __name__ == "__main__":
    sys.exit(main())
