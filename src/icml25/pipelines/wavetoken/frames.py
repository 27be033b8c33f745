"""Long-format tables for the wavetoken pipeline's datasets (parquet-friendly, DVC-friendly).

Series of different lengths are stored one row per point; these functions convert between those
tables and the lists of arrays the method code works on.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd

SERIES_COLUMNS = ["collection", "series", "t", "value"]


def series_to_frame(collections: Mapping[str, Iterable[np.ndarray]]) -> pd.DataFrame:
    """``{collection: [array, ...]}`` -> rows ``(collection, series, t, value)``."""
    parts = []
    for name, arrays in collections.items():
        for i, values in enumerate(arrays):
            values = np.asarray(values, dtype=np.float64).ravel()
            parts.append(pd.DataFrame({
                "collection": name, "series": i, "t": np.arange(values.size), "value": values,
            }))
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype=d) for c, d in
                             zip(SERIES_COLUMNS, ["object", "int64", "int64", "float64"],
                                 strict=True)})
    return pd.concat(parts, ignore_index=True)


def frame_to_series(frame: pd.DataFrame, collection: str | None = None) -> list[np.ndarray]:
    """Rows of one collection (or all) -> list of arrays ordered by ``series`` then ``t``."""
    missing = set(SERIES_COLUMNS) - set(frame.columns)
    if missing:
        raise ValueError(f"series table lacks columns {sorted(missing)}")
    if collection is not None:
        frame = frame[frame["collection"] == collection]
    frame = frame.sort_values(["collection", "series", "t"], kind="stable")
    return [g["value"].to_numpy(dtype=np.float64)
            for _, g in frame.groupby(["collection", "series"], sort=False)]


@dataclass(frozen=True)
class EvalSet:
    """One evaluation dataset: the history and the future (last ``horizon`` points) of each series.

    ``group`` is ``in_domain`` or ``zero_shot`` (real series), ``kernelsynth`` (held-out
    synthetic series) or ``stress`` (the paper's Figure-1 patterns).
    """

    name: str
    group: str
    season: int
    horizon: int
    histories: list[np.ndarray]
    futures: np.ndarray  # [n, horizon]


EVAL_COLUMNS = ["dataset", "group", "season", "horizon", "series", "part", "t", "value"]


def eval_sets_to_frame(sets: Iterable[EvalSet]) -> pd.DataFrame:
    parts = []
    for s in sets:
        for i, (history, future) in enumerate(zip(s.histories, s.futures, strict=True)):
            for part, values in (("history", history), ("future", future)):
                parts.append(pd.DataFrame({
                    "dataset": s.name, "group": s.group, "season": s.season, "horizon": s.horizon,
                    "series": i, "part": part, "t": np.arange(len(values)),
                    "value": np.asarray(values, dtype=np.float64),
                }))
    if not parts:
        raise ValueError("no evaluation sets to store")
    return pd.concat(parts, ignore_index=True)


def frame_to_eval_sets(frame: pd.DataFrame) -> list[EvalSet]:
    missing = set(EVAL_COLUMNS) - set(frame.columns)
    if missing:
        raise ValueError(f"evaluation table lacks columns {sorted(missing)}")
    if frame.empty:
        raise ValueError("evaluation table is empty")
    sets = []
    frame = frame.sort_values(["dataset", "series", "part", "t"], kind="stable")
    for name, rows in frame.groupby("dataset", sort=False):
        first = rows.iloc[0]
        histories, futures = [], []
        for _, g in rows.groupby("series", sort=True):
            histories.append(g.loc[g["part"] == "history", "value"].to_numpy(np.float64))
            futures.append(g.loc[g["part"] == "future", "value"].to_numpy(np.float64))
        horizon = int(first["horizon"])
        if any(len(f) != horizon for f in futures):
            raise ValueError(f"evaluation set {name}: a future window is not {horizon} long")
        sets.append(EvalSet(str(name), str(first["group"]), int(first["season"]), horizon,
                            histories, np.stack(futures)))
    return sets


FORECAST_COLUMNS = ["variant", "seed", "dataset", "series", "quantile", "step", "value"]


def quantiles_to_frame(variant: str, seed: int, dataset: str, quantiles: np.ndarray,
                       levels: list[float]) -> pd.DataFrame:
    """Quantile forecasts ``[n, Q, H]`` of one dataset -> forecast rows."""
    n, q, h = quantiles.shape
    series, level, step = np.meshgrid(np.arange(n), np.arange(q), np.arange(h), indexing="ij")
    return pd.DataFrame({
        "variant": variant, "seed": seed, "dataset": dataset, "series": series.ravel(),
        "quantile": np.asarray(levels)[level.ravel()], "step": step.ravel(),
        "value": quantiles.ravel(),
    })


def frame_to_quantiles(frame: pd.DataFrame, levels: list[float]) -> np.ndarray:
    """Forecast rows of one (variant, seed, dataset) -> ``[n, Q, H]`` in level order."""
    n = int(frame["series"].max()) + 1
    h = int(frame["step"].max()) + 1
    level_index = {float(q): i for i, q in enumerate(levels)}
    out = np.full((n, len(levels), h), np.nan)
    idx = frame["quantile"].map(lambda q: level_index[float(q)]).to_numpy()
    out[frame["series"].to_numpy(), idx, frame["step"].to_numpy()] = frame["value"].to_numpy()
    if np.isnan(out).any():
        raise ValueError("forecast table has missing (series, quantile, step) cells")
    return out


def context_matrix(histories: list[np.ndarray], length: int) -> np.ndarray:
    """Last ``length`` points of each history, left-padded with NaN (= no history)."""
    out = np.full((len(histories), length), np.nan)
    for i, h in enumerate(histories):
        tail = h[-length:]
        out[i, length - len(tail):] = tail
    return out
