"""Any dataset a user names in conf, for the wavetoken pipeline (no code change).

A name in ``wavetoken.data.in_domain`` or ``wavetoken.data.zero_shot`` is resolved, in order:

1. ``wavetoken.data.datasets.<name>.loader`` set: a callable of an installed package,
   ``"module:attribute.path"`` (e.g. ``"statsmodels.api:datasets.nile.load_pandas"``), called
   with ``kwargs``. Its result may be a long table (columns ``item_id``, ``timestamp``,
   ``target``), a wide table (every numeric column, or ``columns``, is one series), a
   ``pandas.Series``, a 1-D array (one series), a 2-D array (one series per row), a list of
   1-D arrays, or a statsmodels ``Dataset`` (its ``data`` table).
2. A file ``<name>.parquet`` or ``<name>.csv`` in the catalog entry ``wavetoken.user_series``
   (by default ``data/01_raw/user/wavetoken/``, per environment): a long table with columns
   ``item_id``, ``timestamp``, ``target`` (other names through ``item_id``/``timestamp``/
   ``target`` in the dataset's entry).
3. The package-shipped datasets of :mod:`icml25.pipelines.wavetoken.real_data`.

Frequency, horizon and season are taken from ``wavetoken.data.datasets.<name>`` when given,
else inferred: the frequency from the timestamps (``pandas.infer_freq``, the same for every
item), the season from the frequency (:func:`~icml25.pipelines.wavetoken.metrics.seasonality`,
gluonts' rule) and the horizon from the frequency by the M4 / Chronos benchmark convention
(:data:`DEFAULT_HORIZONS`). Timestamps missing inside a series become NaN and are interpolated
like every dataset's (``real_data._clean``); timestamps off the frequency's grid, duplicates,
non-numeric targets and empty tables are refused with the file and column named.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from kedro.io import AbstractDataset, DatasetError

from icml25.pipelines.wavetoken.metrics import seasonality
from icml25.pipelines.wavetoken.params import DatasetSpec

#: Forecast horizon by base frequency when a dataset gives none: M4's (yearly 6, quarterly 8,
#: monthly 18, weekly 13, daily 14, hourly 48), which the Chronos benchmark keeps; sub-hourly
#: data 48 steps, business days 14, a frequency without a calendar 1 step per ``season``.
DEFAULT_HORIZONS: dict[str, int] = {"Y": 6, "Q": 8, "M": 18, "W": 13, "D": 14, "B": 14,
                                    "H": 48, "T": 48, "S": 48, "L": 48}

SUFFIXES = (".parquet", ".csv")


class SeriesTableDataset(AbstractDataset[pd.DataFrame, pd.DataFrame]):
    """A user's series table, read by suffix (``.parquet`` or ``.csv``); read-only."""

    def __init__(self, filepath: str, metadata: dict[str, Any] | None = None) -> None:
        self._filepath = Path(filepath)
        self.metadata = metadata

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}

    def load(self) -> pd.DataFrame:
        suffix = self._filepath.suffix.lower()
        if suffix not in SUFFIXES:
            raise DatasetError(f"{self._filepath}: a wavetoken user table must be .parquet or "
                               f".csv, got {suffix or 'no suffix'!r}")
        try:
            if suffix == ".parquet":
                return pd.read_parquet(self._filepath)
            return pd.read_csv(self._filepath)
        except Exception as err:  # a corrupt file: name it
            raise DatasetError(f"{self._filepath}: cannot be read as {suffix[1:]} "
                               f"({type(err).__name__}: {err})") from err

    def save(self, data: pd.DataFrame) -> None:
        raise DatasetError(f"{self._filepath}: wavetoken user tables are inputs; icml25 never "
                           "writes them")


def user_tables(partitions: Mapping[str, Any] | None) -> dict[str, Callable[[], pd.DataFrame]]:
    """``{dataset name: loader}`` of the ``wavetoken.user_series`` folder's files (the name is
    the file name without ``.parquet``/``.csv``); two files of one name are refused."""
    tables: dict[str, Callable[[], pd.DataFrame]] = {}
    for key, load in (partitions or {}).items():
        path = Path(key)
        if path.suffix.lower() not in SUFFIXES:
            continue
        name = path.stem if path.parent == Path(".") else str(path.with_suffix(""))
        if name in tables:
            raise ValueError(f"wavetoken.user_series: two files for dataset {name!r} "
                             "(.csv and .parquet); keep one")
        tables[name] = load if callable(load) else (lambda frame=load: frame)
    return tables


def resolve_callable(entry: str) -> Callable[..., Any]:
    """``"module:attr.path"`` (or ``"module.attr"``) -> the object, with errors naming it."""
    module_name, sep, attr = entry.partition(":")
    if not sep:
        module_name, _, attr = entry.rpartition(".")
    if not module_name or not attr:
        raise ValueError(f"loader {entry!r}: write it as 'module:attribute' (e.g. "
                         "'statsmodels.api:datasets.nile.load_pandas')")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"loader {entry!r}: cannot import module {module_name!r} ({err})"
                         ) from err
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"loader {entry!r}: {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise ValueError(f"loader {entry!r}: {attr!r} is not callable")
    return obj


def _base(freq: str) -> str:
    offset = pd.tseries.frequencies.to_offset(freq)
    name = offset.name.split("-")[0]
    aliases = {"YE": "Y", "YS": "Y", "A": "Y", "AS": "Y", "BYE": "Y", "QE": "Q", "QS": "Q",
               "BQE": "Q", "ME": "M", "MS": "M", "BME": "M", "BMS": "M", "h": "H", "min": "T",
               "s": "S", "ms": "L", "us": "L", "ns": "L", "C": "B"}
    return aliases.get(name, name)


def default_horizon(freq: str) -> int:
    """The horizon of :data:`DEFAULT_HORIZONS` for a pandas frequency string."""
    base = _base(freq)
    if base not in DEFAULT_HORIZONS:
        raise ValueError(f"no default horizon for frequency {freq!r}; set "
                         "wavetoken.data.datasets.<name>.horizon")
    return DEFAULT_HORIZONS[base]


def _freq_of_index(index: pd.Index, where: str) -> str | None:
    if isinstance(index, pd.PeriodIndex):
        return index.freqstr
    if isinstance(index, pd.DatetimeIndex):
        if index.freqstr:
            return index.freqstr
        if len(index) >= 3:
            return pd.infer_freq(index)
    return None


def infer_frequency(index: pd.DatetimeIndex) -> str | None:
    """``pandas.infer_freq`` of the timestamps, or, when gaps make it give up, the frequency
    most runs of three consecutive timestamps agree on (None if there is none)."""
    if len(index) < 3:
        return None
    freq = pd.infer_freq(index)
    if freq is not None:
        return freq
    runs = [pd.infer_freq(index[i:i + 3]) for i in range(len(index) - 2)]
    runs = [r for r in runs if r is not None]
    return max(set(runs), key=runs.count) if runs else None


def series_from_long(frame: pd.DataFrame, where: str, item_id: str = "item_id",
                     timestamp: str = "timestamp", target: str = "target",
                     freq: str | None = None) -> tuple[list[np.ndarray], str]:
    """A long table -> (one float64 array per item, in sorted ``item_id`` order; frequency).

    Every item is put on its frequency's grid from its first to its last timestamp; missing
    steps are NaN (interpolated later). ``freq`` None infers it per item; items must agree.
    """
    missing = [c for c in (item_id, timestamp, target) if c not in frame.columns]
    if missing:
        raise ValueError(f"{where}: missing column(s) {missing}; the table has "
                         f"{list(frame.columns)} (set item_id/timestamp/target in "
                         "wavetoken.data.datasets.<name> for other names)")
    if frame.empty:
        raise ValueError(f"{where}: the table has no rows")
    try:
        times = pd.to_datetime(frame[timestamp])
    except (ValueError, TypeError) as err:
        raise ValueError(f"{where}: column {timestamp!r} is not a timestamp ({err})") from err
    try:
        values = pd.to_numeric(frame[target])
    except (ValueError, TypeError) as err:
        raise ValueError(f"{where}: column {target!r} is not numeric ({err})") from err
    table = pd.DataFrame({"item": frame[item_id].to_numpy(), "t": times.to_numpy(),
                          "y": values.to_numpy(dtype=np.float64)})
    series, freqs = [], {}
    for item, g in table.groupby("item", sort=True):
        g = g.sort_values("t")
        if g["t"].duplicated().any():
            raise ValueError(f"{where}: item {item!r} has duplicate timestamps "
                             f"(first: {g.loc[g['t'].duplicated(), 't'].iloc[0]})")
        index = pd.DatetimeIndex(g["t"])
        f = freq or infer_frequency(index)
        if f is None:
            raise ValueError(f"{where}: cannot infer the frequency of item {item!r} from its "
                             f"{len(index)} timestamps; set wavetoken.data.datasets.<name>.freq")
        freqs[item] = f
        grid = pd.date_range(index[0], index[-1], freq=f)
        off = index.difference(grid)
        if len(off):
            raise ValueError(f"{where}: item {item!r} has timestamps off the {f!r} grid "
                             f"(first: {off[0]}); set wavetoken.data.datasets.<name>.freq")
        series.append(pd.Series(g["y"].to_numpy(), index=index).reindex(grid).to_numpy())
    if freq is None and len({_base(f) for f in freqs.values()}) > 1:
        raise ValueError(f"{where}: items have different frequencies "
                         f"{sorted(set(freqs.values()))}; one dataset has one frequency")
    return series, freq or next(iter(freqs.values()))


def series_from_object(obj: Any, where: str, entry: Any) -> tuple[list[np.ndarray], str | None]:
    """Whatever a loader returned -> (series, frequency or None)."""
    if hasattr(obj, "data") and isinstance(obj.data, pd.DataFrame):
        obj = obj.data  # a statsmodels Dataset
    if isinstance(obj, pd.DataFrame):
        if {entry.item_id, entry.timestamp, entry.target} <= set(obj.columns):
            return series_from_long(obj, where, entry.item_id, entry.timestamp, entry.target,
                                    entry.freq)
        columns = entry.columns or [c for c in obj.columns
                                   if pd.api.types.is_numeric_dtype(obj[c])]
        unknown = [c for c in columns if c not in obj.columns]
        if unknown or not columns:
            raise ValueError(f"{where}: columns {unknown or columns} not in the loader's table "
                             f"({list(obj.columns)})")
        return ([obj[c].to_numpy(dtype=np.float64) for c in columns],
                entry.freq or _freq_of_index(obj.index, where))
    if isinstance(obj, pd.Series):
        return [obj.to_numpy(dtype=np.float64)], entry.freq or _freq_of_index(obj.index, where)
    if isinstance(obj, list | tuple) and obj and all(np.ndim(x) == 1 for x in obj):
        return [np.asarray(x, dtype=np.float64) for x in obj], entry.freq
    arr = np.asarray(obj, dtype=np.float64)
    if arr.ndim == 1:
        return [arr], entry.freq
    if arr.ndim == 2:
        return list(arr), entry.freq
    raise ValueError(f"{where}: the loader returned {type(obj).__name__} of shape "
                     f"{getattr(arr, 'shape', None)}; expected a table, a series or 1-D/2-D "
                     "values")


def load_named_datasets(names: list[tuple[str, str]], entries: Mapping[str, Any],
                        partitions: Mapping[str, Any] | None) -> list:
    """The datasets ``[(name, role), ...]`` resolved as the module docstring says; every name is
    checked before any is loaded."""
    from icml25.pipelines.wavetoken.real_data import (
        AVAILABLE_DATASETS,
        SeriesDataset,
        _clean,
        load_dataset,
    )

    tables = user_tables(partitions)
    unknown = [n for n, _ in names if not (getattr(entries.get(n), "loader", None)
                                           or n in tables or n in AVAILABLE_DATASETS)]
    if unknown:
        raise KeyError(
            f"unknown wavetoken dataset(s) {unknown}: not a loader in wavetoken.data.datasets, "
            f"not a file <name>.parquet/.csv in wavetoken.user_series ({sorted(tables) or 'none'}"
            f"), not shipped ({', '.join(sorted(AVAILABLE_DATASETS))})")
    clashes = sorted(n for n, _ in names if n in tables and n in AVAILABLE_DATASETS)
    if clashes:
        raise ValueError(f"user file(s) {clashes} in wavetoken.user_series share a name with a "
                         "shipped dataset; rename the file(s)")
    out = []
    for name, role in names:
        entry = entries.get(name)
        if entry is not None and entry.loader:
            where = f"wavetoken.data.datasets.{name} (loader {entry.loader})"
            raw, freq = series_from_object(resolve_callable(entry.loader)(**entry.kwargs), where,
                                           entry)
        elif name in tables:
            where = f"wavetoken.user_series file {name}"
            s = entry or _DEFAULT_ENTRY
            raw, freq = series_from_long(tables[name](), where, s.item_id, s.timestamp, s.target,
                                         s.freq)
        else:
            ds = load_dataset(name)
            s = entry or _DEFAULT_ENTRY  # a shipped dataset's calendar may be overridden
            freq = s.freq or ds.freq
            season = s.season or (seasonality(s.freq) if s.freq else ds.season)
            out.append(SeriesDataset(name, role, freq, s.horizon or ds.horizon, season,
                                     ds.series))
            continue
        if freq is None and not (entry and entry.season and entry.horizon):
            raise ValueError(f"{where}: no frequency given or found in the data; set "
                             f"wavetoken.data.datasets.{name}.freq (or season and horizon)")
        try:
            series = [_clean(y) for y in raw]
        except ValueError as err:
            raise ValueError(f"{where}: {err}") from err
        horizon = (entry.horizon if entry and entry.horizon else default_horizon(freq))
        season = (entry.season if entry and entry.season else seasonality(freq))
        out.append(SeriesDataset(name, role, freq or "unknown", horizon, season, series))
    return out


_DEFAULT_ENTRY = DatasetSpec()
