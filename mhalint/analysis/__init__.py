"""The analysis core every rule shares and that knows no rule: what each tensor axis holds (axes, names,
documented, tensors), what a mask means (masks), what reaches a read (dataflow) and the run's other files
(project). See docs/architecture.md#analysis."""
