"""The package version: the one place it is written down."""

__version__ = "0.1.0"
MIN_TORCH_NPU = (2, 8)
