"""fitrules: decide honestly whether a closed-form rule predicts a grid of experiments."""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("fitrules")
except PackageNotFoundError:  # running from a checkout without installing
    __version__ = "0.0.0+unknown"
