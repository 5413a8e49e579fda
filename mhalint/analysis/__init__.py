"""The analysis core every rule shares and that knows no rule: what each tensor axis holds (axes, names,
documented, tensors). See docs/architecture.md#analysis."""
