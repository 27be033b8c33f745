"""Kedro runners beyond Kedro's own: :class:`DaskRunner` runs a pipeline on a Dask cluster."""

from icml25.runners.dask import DaskRunner

__all__ = ["DaskRunner"]
