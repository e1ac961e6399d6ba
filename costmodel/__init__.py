"""costmodel: a learned cost-model tuner for Triton GPU kernels."""

__version__ = "0.1.0"
