"""Any dataset a user names in conf: files in wavetoken.user_series, loaders, shipped sets."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from kedro.io import DatasetError

from icml25.core.datasets import OptionalPartitionedDataset
from icml25.pipelines.wavetoken.params import DataParams, DatasetSpec
from icml25.pipelines.wavetoken.real_data import load_dataset
from icml25.pipelines.wavetoken.user_data import (
    SeriesTableDataset,
    default_horizon,
    infer_frequency,
    load_named_datasets,
    resolve_callable,
    series_from_long,
)


def _long(items: dict[str, np.ndarray], freq: str, start: str = "2001-01-01") -> pd.DataFrame:
    frames = [pd.DataFrame({"item_id": name, "timestamp": pd.date_range(start, periods=len(y),
                                                                         freq=freq),
                            "target": y}) for name, y in items.items()]
    return pd.concat(frames, ignore_index=True)


def _partitions(tmp_path, frames: dict[str, pd.DataFrame]) -> dict:
    """Write files into a folder and read them back through the catalog's dataset types."""
    folder = tmp_path / "user"
    folder.mkdir()
    for name, frame in frames.items():
        if name.endswith(".csv"):
            frame.to_csv(folder / name, index=False)
        else:
            frame.to_parquet(folder / name, index=False)
    return OptionalPartitionedDataset(
        path=str(folder), dataset="icml25.pipelines.wavetoken.user_data.SeriesTableDataset"
    ).load()


def test_long_files_csv_and_parquet_become_datasets_with_inferred_calendar(tmp_path):
    rng = np.random.default_rng(0)
    monthly = _long({"a": rng.normal(10, 1, 60), "b": rng.normal(5, 1, 48)}, "MS")
    monthly = monthly.drop(index=7).sample(frac=1.0, random_state=1)  # a gap, shuffled rows
    hourly = _long({"x": rng.normal(0, 1, 200)}, "h")
    parts = _partitions(tmp_path, {"shop.csv": monthly, "sensor.parquet": hourly})
    shop, sensor = load_named_datasets([("shop", "zero_shot"), ("sensor", "in_domain")], {},
                                       parts)
    assert (shop.name, shop.role, shop.freq, shop.horizon, shop.season) == (
        "shop", "zero_shot", "MS", 18, 12)
    assert [len(s) for s in shop.series] == [60, 48]
    expected = monthly.sort_index()[monthly.sort_index()["item_id"] == "a"]["target"].to_numpy()
    np.testing.assert_allclose(np.delete(shop.series[0], 7), expected)
    # the missing month is interpolated between its neighbours
    assert shop.series[0][7] == pytest.approx((shop.series[0][6] + shop.series[0][8]) / 2)
    assert (sensor.freq, sensor.horizon, sensor.season, sensor.role) == ("h", 48, 24, "in_domain")


def test_conf_overrides_calendar_and_column_names(tmp_path):
    frame = _long({"a": np.arange(30.0)}, "W-SUN").rename(
        columns={"item_id": "store", "timestamp": "week", "target": "sales"})
    parts = _partitions(tmp_path, {"sales.parquet": frame})
    spec = DatasetSpec(item_id="store", timestamp="week", target="sales", horizon=4, season=52)
    (ds,) = load_named_datasets([("sales", "zero_shot")], {"sales": spec}, parts)
    assert (ds.horizon, ds.season, ds.freq) == (4, 52, "W-SUN")


def test_loader_of_an_installed_package_by_name():
    spec = DatasetSpec(loader="statsmodels.api:datasets.nile.load_pandas", columns=["volume"],
                       freq="YS", horizon=10)
    (ds,) = load_named_datasets([("nile_again", "zero_shot")], {"nile_again": spec}, None)
    shipped = load_dataset("nile")
    np.testing.assert_array_equal(ds.series[0], shipped.series[0])
    assert (ds.horizon, ds.season) == (10, 1)
    # a pandas Series with a DatetimeIndex carries its own frequency
    spec = DatasetSpec(loader="pandas:Series", kwargs={
        "data": list(range(50)), "index": pd.date_range("2020-01-01", periods=50, freq="D")})
    (ds,) = load_named_datasets([("days", "zero_shot")], {"days": spec}, None)
    assert (ds.freq, ds.horizon, ds.season) == ("D", 14, 1)


def test_shipped_dataset_calendar_can_be_overridden_and_unknown_names_fail_first():
    (ds,) = load_named_datasets([("airline", "zero_shot")],
                                {"airline": DatasetSpec(horizon=24)}, None)
    assert (ds.horizon, ds.season) == (24, 12)
    with pytest.raises(KeyError, match=r"unknown wavetoken dataset\(s\) \['nope'\]"):
        load_named_datasets([("airline", "zero_shot"), ("nope", "zero_shot")], {}, None)


@pytest.mark.parametrize(("frame", "match"), [
    (pd.DataFrame({"item_id": ["a"], "time": ["2020-01-01"], "target": [1.0]}),
     r"missing column\(s\) \['timestamp'\]"),
    (pd.DataFrame({"item_id": [], "timestamp": [], "target": []}), "no rows"),
    (_long({"a": np.arange(10.0)}, "D").assign(target=list("abcdefghij")), "not numeric"),
    (pd.concat([_long({"a": np.arange(10.0)}, "D")] * 2), "duplicate timestamps"),
    (pd.concat([_long({"a": np.arange(10.0)}, "D"), _long({"b": np.arange(10.0)}, "MS")]),
     "different frequencies"),
    (pd.DataFrame({"item_id": ["a"] * 2, "timestamp": ["2020-01-01", "2020-01-02"],
                   "target": [1.0, 2.0]}), "cannot infer the frequency"),
])
def test_bad_tables_are_refused_naming_the_file(frame, match):
    with pytest.raises(ValueError, match=match) as err:
        load_named_datasets([("bad", "zero_shot")], {}, {"bad.csv": lambda: frame})
    assert "wavetoken.user_series file bad" in str(err.value)


def test_off_grid_timestamps_and_name_clashes_are_refused(tmp_path):
    frame = _long({"a": np.arange(12.0)}, "D")
    frame.loc[3, "timestamp"] = frame.loc[3, "timestamp"] + pd.Timedelta(hours=5)
    with pytest.raises(ValueError, match="off the 'D' grid"):
        series_from_long(frame, "f", freq="D")
    with pytest.raises(ValueError, match="share a name with a shipped dataset"):
        load_named_datasets([("airline", "zero_shot")], {},
                            {"airline.csv": lambda: _long({"a": np.arange(30.0)}, "MS")})


def test_corrupt_or_wrong_suffix_files_name_the_path(tmp_path):
    bad = tmp_path / "broken.parquet"
    bad.write_bytes(b"not a parquet file")
    with pytest.raises(DatasetError, match=r"broken\.parquet: cannot be read as parquet"):
        SeriesTableDataset(str(bad)).load()
    with pytest.raises(DatasetError, match=r"must be \.parquet or \.csv"):
        SeriesTableDataset(str(tmp_path / "x.xlsx")).load()
    with pytest.raises(DatasetError, match="never writes"):
        SeriesTableDataset(str(bad)).save(pd.DataFrame())
    assert OptionalPartitionedDataset(path=str(tmp_path / "absent"),
                                      dataset="pandas.CSVDataset").load() == {}


def test_loader_specs_and_frequencies_are_checked():
    with pytest.raises(ValueError, match="cannot import module 'no_such_pkg'"):
        resolve_callable("no_such_pkg:load")
    with pytest.raises(ValueError, match=r"has no attribute 'datasets\.nope'"):
        resolve_callable("statsmodels.api:datasets.nope")
    with pytest.raises(ValueError, match="not a pandas frequency"):
        DatasetSpec(freq="fortnightly")
    with pytest.raises(ValueError, match="no default horizon"):
        default_horizon("SMS")  # semi-month start: no convention
    assert [default_horizon(f) for f in ("YS", "QE", "MS", "W-SUN", "D", "B", "h", "30min")] == [
        6, 8, 18, 13, 14, 14, 48, 48]
    gaps = pd.DatetimeIndex(pd.date_range("2000-01-01", periods=30, freq="MS").delete([4, 9]))
    assert pd.infer_freq(gaps) is None and infer_frequency(gaps) == "MS"
    assert DataParams(in_domain=["taylor"], zero_shot=["mine"],
                      datasets={"mine": {"horizon": 3}}).datasets["mine"].horizon == 3

