"""Bad data between nodes gets a clear error, never a silent wrong number."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from omegaconf import OmegaConf

from icml25.pipelines.sgd_hitting import nodes
from icml25.pipelines.sgd_hitting.scaling_fits import ols, scaling_fit

PROJECT_ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def params():
    root = PROJECT_ROOT / "conf"
    base = yaml.safe_load((root / "base/parameters_sgd_hitting.yml").read_text())
    test = yaml.safe_load((root / "test/parameters_sgd_hitting.yml").read_text())
    return OmegaConf.to_container(OmegaConf.merge(base, test))["sgd_hitting"]


@pytest.fixture(scope="module")
def table(params):
    return nodes.find_critical_points(params)


def test_empty_or_incomplete_critical_points_are_refused(params):
    with pytest.raises(ValueError, match="critical_points: empty table"):
        nodes.compute_costs(pd.DataFrame(), params)
    with pytest.raises(ValueError, match="missing columns"):
        nodes.compute_costs(pd.DataFrame({"landscape": ["l1"]}), params)


def test_nan_hitting_times_are_refused(params):
    mc = pd.DataFrame({"experiment": "l1_mc_gaussian", "seed": 0, "eta": [0.3, 0.2],
                       "tau": [np.nan, 3.0], "censored": False})
    with pytest.raises(ValueError, match="NaN"):
        nodes.fit_scaling(mc, pd.DataFrame(columns=["experiment"]), {}, pd.DataFrame(), params)


def test_fits_refuse_bad_step_sizes_and_recover_a_known_line():
    with pytest.raises(ValueError, match="> 0"):
        scaling_fit([0.1, 0.0], [10.0, 20.0])
    etas = np.array([0.1, 0.08, 0.06, 0.05])
    times = np.exp(0.3 / etas + 1.2) / etas
    fit = scaling_fit(etas, times)
    assert fit["slope"] == pytest.approx(0.3) and fit["r2"] == pytest.approx(1.0)
    assert fit["local_slope"] == pytest.approx(0.3)
    with pytest.raises(ValueError, match="two or more"):
        ols([1.0], [2.0])


def test_monte_carlo_results_do_not_depend_on_the_number_of_workers(params, table):
    small = {**params, "experiments": {
        name: ({**e, "n_chains": 20, "max_steps": 300} if e["solver"] == "mc" else e)
        for name, e in params["experiments"].items()}}
    one = nodes.simulate_hitting_times(table, {**small, "n_workers": 1})
    two = nodes.simulate_hitting_times(table, {**small, "n_workers": 2})
    assert len(one) == 20 * sum(len(e["etas"]) * len(small["seeds"])
                                for e in small["experiments"].values() if e["solver"] == "mc")
    cols = ["experiment", "seed", "eta", "chain", "tau", "censored"]
    pd.testing.assert_frame_equal(one[cols], two[cols])


def test_monte_carlo_in_a_daemonic_process_runs_in_process_with_the_same_results(
        params, table, monkeypatch, caplog):
    """A Dask worker is a daemonic process and may not start children: ``n_workers`` > 1 there
    falls back to one process, with a warning, and gives the table of ``n_workers=1``."""
    small = {**params, "seeds": params["seeds"][:1], "experiments": {
        name: ({**e, "n_chains": 10, "max_steps": 200} if e["solver"] == "mc" else e)
        for name, e in params["experiments"].items()}}
    one = nodes.simulate_hitting_times(table, {**small, "n_workers": 1})
    monkeypatch.setitem(multiprocessing.current_process()._config, "daemon", True)
    with caplog.at_level("WARNING", logger=nodes.__name__):
        daemonic = nodes.simulate_hitting_times(table, {**small, "n_workers": 2})
    assert "n_workers=2 ignored" in caplog.text
    cols = ["experiment", "seed", "eta", "chain", "tau", "censored"]
    pd.testing.assert_frame_equal(one[cols], daemonic[cols])


def test_paper_configuration_code_path_runs_on_cpu_at_tiny_size(table):
    """conf/paper (torch chains, 8 step sizes, the camel at σ = 3) with tiny chain counts."""
    root = PROJECT_ROOT / "conf"
    base = yaml.safe_load((root / "base/parameters_sgd_hitting.yml").read_text())
    paper = yaml.safe_load((root / "paper/parameters_sgd_hitting.yml").read_text())
    p = OmegaConf.to_container(OmegaConf.merge(base, paper))["sgd_hitting"]
    assert p["backend"] == "torch" and p["device"] == "cuda"
    p = {**p, "device": "cpu", "seeds": [0], "progress": False, "experiments": {
        n: ({**e, "n_chains": 8, "max_steps": 200} if e["solver"] == "mc" else e)
        for n, e in p["experiments"].items()}}
    times = nodes.simulate_hitting_times(table, p)
    assert set(times["experiment"]) >= {"l3_sigma3_mc", "l3_mc", "nn_mc_b2"}
    assert (times.groupby("experiment")["eta"].nunique() >= 5).all()
    assert (times["tau"] >= 0).all() and (times["tau"] <= 200).all()
