"""mhalint: a static linter for the PyTorch attention mistakes that corrupt results without raising an error."""

__version__ = "0.1.0"
