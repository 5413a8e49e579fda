"""Reading a file: decoding, CPython's and libcst's parses (function bodies on demand), walks, positions,
comments, notebooks and the re-parse of an edited document."""
