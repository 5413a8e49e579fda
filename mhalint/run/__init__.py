"""Running a check: the engine, its worker processes, the first pass, the prefilter, budgets, interrupts, the
findings cache, the rules' entry points and noqa."""
