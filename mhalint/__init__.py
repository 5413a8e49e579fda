"""mhalint: a static linter for the PyTorch attention mistakes that corrupt results without raising an error."""

__version__ = "0.2.0"
HOME = "https://github.com/mhalint/mhalint"  # pyproject.toml's [project.urls] Repository: where installs come from
# How to get the torch that the probe and the guard need: the version docs/torch-facts.md was measured with,
# pinned, since an open range can make pip pull a multi-GB CUDA build.
INSTALL_TORCH = "pip install 'torch==2.13.0'"


def __getattr__(name: str):
    # `mhalint.guard` (the runtime guard, `with mhalint.guard(): ...`) is imported on first use only, so that
    # `import mhalint` and the static linter never import it (nor torch, which the guard imports when it starts).
    if name == "guard":
        import importlib
        return importlib.import_module("mhalint.guard")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
