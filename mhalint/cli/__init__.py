"""The command line: the commands (`main`), the progress line, the outputs and the summary, the rules' docs."""
