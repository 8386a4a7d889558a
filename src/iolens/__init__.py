"""iolens: end-to-end I/O monitoring and diagnosis for HPC clusters."""

__version__ = "0.1.0"
