"""Real time series that ship inside installed packages (no network), for the wavetoken pipeline.

Implements the data of docs/papers/wavetoken.md ("Data"): five in-domain datasets (trained on all
but the last window, tested on the last window) and thirteen zero-shot datasets (never trained on),
each with one test window = the last ``H`` points of every series, as in the Chronos benchmark
(chronos-forecasting ``scripts/evaluation/evaluate.py``: ``split(offset=-prediction_length)``).

Every loader reads a file bundled with pmdarima, statsmodels, sktime or aeon; none downloads.
``sktime`` and ``aeon`` are imported lazily inside their loaders because importing them is slow.

Cleaning (applies to every dataset): leading and trailing NaNs are dropped, interior NaNs are
linearly interpolated (this matters for co2 weekly, whose 59 missing weeks are interior;
pmdarima's ausbeer has one trailing NaN, so it has 211 observed points, not 212).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from icml25.pipelines.wavetoken.metrics import seasonality

Role = Literal["in_domain", "zero_shot"]

@dataclass(frozen=True)
class SeriesDataset:
    """One benchmark dataset: every series is a 1-D float64 array without NaNs.

    ``season`` = gluonts ``get_seasonality`` of ``freq`` (via
    :func:`icml25.pipelines.wavetoken.metrics.seasonality`; used by seasonal naive and MASE).
    """

    name: str
    role: Role
    freq: str
    horizon: int
    season: int
    series: list[np.ndarray]

    def __post_init__(self) -> None:
        if self.role not in ("in_domain", "zero_shot"):
            raise ValueError(f"{self.name}: role must be in_domain or zero_shot, got {self.role!r}")
        if self.horizon < 1 or self.season < 1:
            raise ValueError(f"{self.name}: horizon and season must be >= 1")
        if not self.series:
            raise ValueError(f"{self.name}: no series")


def _clean(values: Iterable[float] | np.ndarray) -> np.ndarray:
    """Float64 copy with leading/trailing NaNs dropped and interior NaNs linearly interpolated."""
    y = np.asarray(values, dtype=np.float64).ravel()
    observed = np.flatnonzero(np.isfinite(y))
    if observed.size == 0:
        raise ValueError("series has no finite value")
    y = y[observed[0] : observed[-1] + 1].copy()
    missing = ~np.isfinite(y)
    if missing.any():
        t = np.arange(y.size)
        y[missing] = np.interp(t[missing], t[~missing], y[~missing])
    return y


# ---------------------------------------------------------------------------------------------
# Loaders: each returns the raw series (cleaned afterwards by load_dataset).
# ---------------------------------------------------------------------------------------------


def _pmdarima(name: str) -> Callable[[], list[np.ndarray]]:
    def load() -> list[np.ndarray]:
        import pmdarima.datasets

        return [getattr(pmdarima.datasets, f"load_{name}")(as_series=False)]

    return load


def _load_co2_weekly() -> list[np.ndarray]:
    import statsmodels.api as sm

    return [sm.datasets.co2.load_pandas().data["co2"].to_numpy()]


def _load_msft_close() -> list[np.ndarray]:
    import pmdarima.datasets

    return [pmdarima.datasets.load_msft()["Close"].to_numpy()]


def _load_macrodata() -> list[np.ndarray]:
    import statsmodels.api as sm

    frame = sm.datasets.macrodata.load_pandas().data.drop(columns=["year", "quarter"])
    return [frame[column].to_numpy() for column in frame.columns]


def _load_m1_yearly() -> list[np.ndarray]:
    import aeon.datasets

    path = (
        Path(aeon.datasets.__file__).parent
        / "data"
        / "m1_yearly_dataset"
        / "m1_yearly_dataset.tsf"
    )
    frame, _meta = aeon.datasets.load_from_tsf_file(str(path))
    return [np.asarray(values, dtype=np.float64) for values in frame["series_value"]]


def _load_airline() -> list[np.ndarray]:
    import sktime.datasets

    return [sktime.datasets.load_airline().to_numpy()]


def _load_pbs() -> list[np.ndarray]:
    import sktime.datasets

    return [sktime.datasets.load_PBS_dataset().to_numpy()]


def _load_uschange() -> list[np.ndarray]:
    import aeon.datasets

    return list(np.asarray(aeon.datasets.load_uschange(return_array=True), dtype=np.float64))


def _load_sunspots_yearly() -> list[np.ndarray]:
    import statsmodels.api as sm

    return [sm.datasets.sunspots.load_pandas().data["SUNACTIVITY"].to_numpy()]


def _load_nile() -> list[np.ndarray]:
    import statsmodels.api as sm

    return [sm.datasets.nile.load_pandas().data["volume"].to_numpy()]


def _load_elnino() -> list[np.ndarray]:
    import statsmodels.api as sm

    # 61 rows (years) x 12 month columns -> one monthly series, row-major = chronological.
    frame = sm.datasets.elnino.load_pandas().data.drop(columns=["YEAR"])
    return [frame.to_numpy(dtype=np.float64).ravel()]


_LOADERS: dict[str, tuple[Role, str, int, Callable[[], list[np.ndarray]]]] = {
    # in-domain
    "taylor": ("in_domain", "30min", 48, _pmdarima("taylor")),
    "co2_weekly": ("in_domain", "W", 52, _load_co2_weekly),
    "sunspots_monthly": ("in_domain", "M", 24, _pmdarima("sunspots")),
    "msft_close": ("in_domain", "B", 30, _load_msft_close),
    "macrodata": ("in_domain", "Q", 8, _load_macrodata),
    # zero-shot
    "m1_yearly": ("zero_shot", "Y", 6, _load_m1_yearly),
    "airline": ("zero_shot", "M", 12, _load_airline),
    "wineind": ("zero_shot", "M", 12, _pmdarima("wineind")),
    "woolyrnq": ("zero_shot", "Q", 8, _pmdarima("woolyrnq")),
    "ausbeer": ("zero_shot", "Q", 8, _pmdarima("ausbeer")),
    "austres": ("zero_shot", "Q", 8, _pmdarima("austres")),
    "lynx": ("zero_shot", "Y", 8, _pmdarima("lynx")),
    # pmdarima: "150 evenly spaced (0.5 seconds) heartrate measurements"; gluonts gives 1.
    "heartrate": ("zero_shot", "500ms", 10, _pmdarima("heartrate")),
    "pbs": ("zero_shot", "M", 12, _load_pbs),
    "uschange": ("zero_shot", "Q", 8, _load_uschange),
    "sunspots_yearly": ("zero_shot", "Y", 11, _load_sunspots_yearly),
    "nile": ("zero_shot", "Y", 10, _load_nile),
    "elnino": ("zero_shot", "M", 12, _load_elnino),
}

#: name -> (role, freq, horizon) of every dataset :func:`load_dataset` knows.
AVAILABLE_DATASETS: dict[str, tuple[Role, str, int]] = {
    name: (role, freq, horizon) for name, (role, freq, horizon, _) in _LOADERS.items()
}


def load_dataset(name: str) -> SeriesDataset:
    """Load one dataset of :data:`AVAILABLE_DATASETS` (cleaned, float64, no NaN)."""
    if name not in _LOADERS:
        raise KeyError(
            f"unknown wavetoken dataset {name!r}; available: {', '.join(sorted(_LOADERS))}"
        )
    role, freq, horizon, loader = _LOADERS[name]
    series = [_clean(values) for values in loader()]
    return SeriesDataset(
        name=name,
        role=role,
        freq=freq,
        horizon=horizon,
        season=seasonality(freq),
        series=series,
    )


def load_datasets(names: Sequence[str]) -> list[SeriesDataset]:
    """Load several datasets; an unknown name fails before anything is loaded."""
    if isinstance(names, str):
        names = [names]
    unknown = [name for name in names if name not in _LOADERS]
    if unknown:
        raise KeyError(
            f"unknown wavetoken dataset(s) {unknown}; available: {', '.join(sorted(_LOADERS))}"
        )
    return [load_dataset(name) for name in names]


def train_test_split(
    ds: SeriesDataset,
) -> tuple[list[np.ndarray], list[tuple[np.ndarray, np.ndarray]]]:
    """Split every series at its last window (Chronos benchmark protocol).

    Returns ``(train_series, test)`` where ``train_series[i] = y[:-H]`` and
    ``test[i] = (history, future) = (y[:-H], y[-H:])``. The training part is exactly the test
    history, so nothing of a test window is ever seen in training. Only in-domain training parts may
    be used for training; the caller decides (zero-shot datasets return them too, for symmetry).
    Raises ``ValueError`` if a series has no point before its last window.
    """
    horizon = ds.horizon
    train: list[np.ndarray] = []
    test: list[tuple[np.ndarray, np.ndarray]] = []
    for i, y in enumerate(ds.series):
        if y.size <= horizon:
            raise ValueError(
                f"{ds.name}: series {i} has {y.size} points, needs more than horizon {horizon}"
            )
        history, future = y[:-horizon].copy(), y[-horizon:].copy()
        train.append(history.copy())
        test.append((history, future))
    return train, test
