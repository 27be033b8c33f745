"""icml25: ICML 2025 papers as runnable, tracked and comparable Kedro pipelines."""

__version__ = "0.1.0"
