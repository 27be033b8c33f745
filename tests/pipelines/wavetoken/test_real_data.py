"""Real series shipped in packages (docs/papers/wavetoken.md, "Data"), loaded with sockets blocked."""

import socket

import numpy as np
import pytest

from icml25.pipelines.wavetoken.real_data import (
    AVAILABLE_DATASETS,
    SeriesDataset,
    load_dataset,
    load_datasets,
    train_test_split,
)

# name: (role, freq, horizon, season, n series, length of each series), as loaded offline
EXPECTED = {
    "taylor": ("in_domain", "30min", 48, 48, 1, 4032),
    "co2_weekly": ("in_domain", "W", 52, 1, 1, 2284),
    "sunspots_monthly": ("in_domain", "M", 24, 12, 1, 2820),
    "msft_close": ("in_domain", "B", 30, 5, 1, 7983),
    "macrodata": ("in_domain", "Q", 8, 4, 12, 203),
    "m1_yearly": ("zero_shot", "Y", 6, 1, 181, None),
    "airline": ("zero_shot", "M", 12, 12, 1, 144),
    "wineind": ("zero_shot", "M", 12, 12, 1, 176),
    "woolyrnq": ("zero_shot", "Q", 8, 4, 1, 119),
    "ausbeer": ("zero_shot", "Q", 8, 4, 1, 211),  # 212 with a trailing NaN, dropped
    "austres": ("zero_shot", "Q", 8, 4, 1, 89),
    "lynx": ("zero_shot", "Y", 8, 1, 1, 114),
    "heartrate": ("zero_shot", "500ms", 10, 1, 1, 150),
    "pbs": ("zero_shot", "M", 12, 12, 1, 204),
    "uschange": ("zero_shot", "Q", 8, 4, 5, 187),
    "sunspots_yearly": ("zero_shot", "Y", 11, 1, 1, 309),
    "nile": ("zero_shot", "Y", 10, 1, 1, 100),
    "elnino": ("zero_shot", "M", 12, 12, 1, 732),
}


@pytest.fixture
def no_network(monkeypatch):
    def refuse(*args, **kwargs):
        raise OSError("network access attempted during a data load")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)


def test_registry_matches_the_documented_datasets():
    assert set(AVAILABLE_DATASETS) == set(EXPECTED)
    for name, (role, freq, horizon, *_rest) in EXPECTED.items():
        assert AVAILABLE_DATASETS[name] == (role, freq, horizon)
    in_domain = [n for n, (role, *_r) in AVAILABLE_DATASETS.items() if role == "in_domain"]
    assert len(in_domain) == 5


@pytest.mark.parametrize("name", list(EXPECTED))
def test_every_loader_works_offline(name, no_network):
    role, freq, horizon, season, n_series, length = EXPECTED[name]
    ds = load_dataset(name)
    assert isinstance(ds, SeriesDataset)
    assert (ds.name, ds.role, ds.freq, ds.horizon, ds.season) == (name, role, freq, horizon, season)
    assert len(ds.series) == n_series
    for y in ds.series:
        assert y.dtype == np.float64 and y.ndim == 1
        assert np.isfinite(y).all()
        if length is not None:
            assert y.size == length
        assert y.size > horizon
    assert np.ptp(np.concatenate(ds.series)) > 0


def test_m1_yearly_is_the_monash_benchmark_copy(no_network):
    ds = load_dataset("m1_yearly")
    lengths = sorted(y.size for y in ds.series)
    assert len(lengths) == 181 and lengths[0] == 15 and lengths[-1] == 58
    assert all(np.all(y > 0) for y in ds.series)


def test_cleaning_interpolates_co2_and_drops_trailing_nan():
    import pmdarima.datasets
    import statsmodels.api as sm

    raw = sm.datasets.co2.load_pandas().data["co2"].to_numpy()
    assert np.isnan(raw).sum() == 59 and not np.isnan(raw[[0, -1]]).any()
    co2 = load_dataset("co2_weekly").series[0]
    observed = ~np.isnan(raw)
    np.testing.assert_array_equal(co2[observed], raw[observed])
    i = int(np.flatnonzero(~observed)[0])  # an interior gap is filled linearly
    left = i - 1
    right = i + int(np.argmax(observed[i:]))
    frac = (i - left) / (right - left)
    assert co2[i] == pytest.approx(raw[left] + frac * (raw[right] - raw[left]))
    beer = pmdarima.datasets.load_ausbeer(as_series=False)
    np.testing.assert_array_equal(load_dataset("ausbeer").series[0], beer[:-1])


def test_macrodata_columns_and_elnino_order():
    import statsmodels.api as sm

    macro = load_dataset("macrodata")
    frame = sm.datasets.macrodata.load_pandas().data
    np.testing.assert_array_equal(macro.series[0], frame["realgdp"].to_numpy())
    np.testing.assert_array_equal(macro.series[-1], frame["realint"].to_numpy())
    elnino = load_dataset("elnino").series[0]
    table = sm.datasets.elnino.load_pandas().data
    np.testing.assert_array_equal(elnino[:12], table.iloc[0, 1:].to_numpy(dtype=float))
    np.testing.assert_array_equal(elnino[-12:], table.iloc[-1, 1:].to_numpy(dtype=float))


def test_train_test_split_is_last_window():
    ds = load_dataset("macrodata")
    train, test = train_test_split(ds)
    assert len(train) == len(test) == 12
    for y, tr, (history, future) in zip(ds.series, train, test, strict=True):
        assert future.size == 8 and tr.size == history.size == 195
        np.testing.assert_array_equal(np.concatenate([history, future]), y)
        np.testing.assert_array_equal(tr, history)
        assert not np.shares_memory(tr, y)  # editing the training part cannot touch the test
    short = SeriesDataset("short", "zero_shot", "Y", 5, 1, [np.arange(5.0)])
    with pytest.raises(ValueError, match="more than horizon"):
        train_test_split(short)


def test_unknown_dataset_is_named():
    with pytest.raises(KeyError, match="gasoline"):
        load_dataset("gasoline")
    with pytest.raises(KeyError, match="m4_hourly"):
        load_datasets(["nile", "m4_hourly"])
    loaded = load_datasets(["nile", "lynx"])
    assert [d.name for d in loaded] == ["nile", "lynx"]


def test_dataset_validates_role():
    with pytest.raises(ValueError, match="role"):
        SeriesDataset("x", "train", "Y", 1, 1, [np.ones(3)])


def test_network_guard_really_blocks(no_network):
    with pytest.raises(OSError, match="network access"):
        socket.create_connection(("198.51.100.1", 80), timeout=0.1)
