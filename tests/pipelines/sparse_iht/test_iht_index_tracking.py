"""Index tracking: the exhaustive optimum against convex solves per support, the returns of a
price table, the bundled prices, and the experiment's invariants."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from icml25.pipelines.sparse_iht import index_tracking as it
from icml25.pipelines.sparse_iht.baselines import best_sparse_feasible
from icml25.pipelines.sparse_iht.params import SparseIHTParams
from icml25.pipelines.sparse_iht.problems import LeastSquares
from icml25.pipelines.sparse_iht.projections import Constraint, feasibility_violation

ROOT = Path(__file__).resolve().parents[3]


def _market(seed=0, assets=7, train=60):
    data = it.synthetic_market(assets, 2, train, 30, 0.002, seed)
    s = np.std(data.y_train)
    return data, LeastSquares(data.X_train / s, data.y_train / s)


@pytest.mark.parametrize("budget", [1.0, 0.3, 0.05])
@pytest.mark.parametrize("seed", [0, 1])
def test_exhaustive_optimum_equals_a_convex_solve_on_every_support(seed, budget):
    # reference: cvxpy (CLARABEL) on each support of size k with w >= 0, sum(w) <= B; budgets
    # from slack (1.0: the index's weights sum to 1 over 7 assets) to strongly binding
    _, problem = _market(seed)
    gamma = Constraint("nonneg_budget", budget=budget)
    ours = it.best_budget_portfolios(problem, [1, 2, 3], budget)
    for k in (1, 2, 3):
        _, r_ref = best_sparse_feasible(problem, k, gamma)
        w, r = ours[k]
        assert r == pytest.approx(r_ref, rel=1e-6)
        assert r <= r_ref * (1 + 1e-9)  # exact KKT points: never worse than the solver
        assert feasibility_violation(w, k, gamma) <= 1e-12
        assert np.count_nonzero(w) <= k


def test_exhaustive_optimum_without_a_binding_budget_is_the_nnls_optimum():
    _, problem = _market(2, assets=8)
    ours = it.best_budget_portfolios(problem, [2, 4], budget=1e6)
    for k in (2, 4):
        _, r_ref = best_sparse_feasible(problem, k, Constraint("nonneg"))  # NNLS per support
        assert ours[k][1] == pytest.approx(r_ref, rel=1e-10)
    # more assets allowed can only lower the optimum
    assert ours[4][1] <= ours[2][1]


def test_an_index_made_of_k_assets_is_found_exactly():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(50, 9)) * 0.01
    w_true = np.zeros(9)
    w_true[[1, 4, 7]] = [0.5, 0.2, 0.3]  # on the budget face: sum = 1
    problem = LeastSquares(X, X @ w_true)
    w, r = it.best_budget_portfolios(problem, [3], 1.0)[3]
    np.testing.assert_allclose(w, w_true, atol=1e-10)
    assert r <= 1e-20
    # with a budget of 0.5 the optimum moves onto the budget face
    w_half, _ = it.best_budget_portfolios(problem, [3], 0.5)[3]
    assert w_half.sum() == pytest.approx(0.5, abs=1e-12) and np.all(w_half >= 0)


def test_exhaustive_search_refuses_bad_sizes():
    _, problem = _market()
    with pytest.raises(ValueError, match="between 1 and 7"):
        it.best_budget_portfolios(problem, [8], 1.0)
    with pytest.raises(ValueError, match="positive budget"):
        it.best_budget_portfolios(problem, [2], 0.0)
    with pytest.raises(ValueError, match="exceeds max_subsets"):
        it.best_budget_portfolios(problem, [3], 1.0, max_subsets=10)
    few = LeastSquares(np.random.default_rng(0).normal(size=(2, 5)), np.ones(2))
    with pytest.raises(ValueError, match="singular"):
        it.best_budget_portfolios(few, [3], 1.0)


def test_tracking_error_is_the_annualised_std_of_the_active_return():
    X = np.array([[0.01, 0.02], [0.03, -0.01], [0.0, 0.01], [-0.02, 0.0]])
    y = np.array([0.015, 0.0, 0.01, -0.01])
    w = np.array([0.4, 0.5])
    active = X @ w - y
    expected = math.sqrt(np.sum((active - active.mean()) ** 2) / 3) * math.sqrt(12)
    assert it.tracking_error(X, y, w, 12) == pytest.approx(expected, rel=1e-14)


def _prices(tmp_path, gap: bool = False):
    days = pd.date_range("2019-12-15", "2021-06-30", freq="7D")
    rng = np.random.default_rng(0)
    prices = pd.DataFrame(np.exp(np.cumsum(rng.normal(0, 0.02, (len(days), 4)), axis=0)),
                          index=days, columns=["A", "B", "C", "IDX"])
    if gap:
        prices.loc["2020-05-01":"2020-06-15", "B"] = np.nan
    path = tmp_path / "prices.csv"
    prices.rename_axis("Date").to_csv(path)
    return path, prices


def test_returns_are_month_end_price_changes_split_by_date(tmp_path):
    path, prices = _prices(tmp_path)
    table = it.load_prices(path)
    data = it.price_returns(table, ["A", "B", "C"], "IDX", ("2020-01-01", "2020-12-31"),
                            ("2021-01-01", "2021-06-30"))
    month_end = prices.groupby(prices.index.to_period("M")).last()
    returns = month_end / month_end.shift(1) - 1  # written from the definition
    np.testing.assert_allclose(data.X_train, returns.loc["2020-01":"2020-12", ["A", "B", "C"]],
                               rtol=1e-12, atol=1e-14)  # csv round trip: 1 ulp
    np.testing.assert_allclose(data.y_test, returns.loc["2021-01":"2021-06", "IDX"], rtol=1e-12)
    assert data.X_train.shape == (12, 3) and data.X_test.shape == (6, 3)
    assert data.assets == ("A", "B", "C")


def test_without_a_frequency_the_rows_are_the_periods(tmp_path):
    path, prices = _prices(tmp_path)
    data = it.price_returns(it.load_prices(path), ["A", "C"], "IDX",
                            ("2020-01-01", "2020-12-31"), ("2021-01-01", "2021-06-30"),
                            frequency=None, periods_per_year=52)
    returns = prices / prices.shift(1) - 1
    np.testing.assert_allclose(data.X_train, returns.loc["2020-01-01":"2020-12-31", ["A", "C"]],
                               rtol=1e-12, atol=1e-14)  # csv round trip: 1 ulp
    np.testing.assert_allclose(data.y_test, returns.loc["2021-01-01":"2021-06-30", "IDX"],
                               rtol=1e-12, atol=1e-14)  # csv round trip: 1 ulp


def test_bad_price_tables_get_clear_errors(tmp_path):
    path, _ = _prices(tmp_path, gap=True)
    table = it.load_prices(path)
    with pytest.raises(ValueError, match=r"missing prices .* \{'B': '2020-05"):
        it.price_returns(table, ["A", "B"], "IDX", ("2020-01-01", "2020-12-31"),
                         ("2021-01-01", "2021-06-30"))
    with pytest.raises(ValueError, match=r"no column \['Z'\]"):
        it.price_returns(table, ["A", "Z"], "IDX", ("2020-01-01", "2020-12-31"),
                         ("2021-01-01", "2021-06-30"))
    with pytest.raises(FileNotFoundError, match=r"index_tracking\.real\.path"):
        it.load_prices(tmp_path / "missing.csv")
    (tmp_path / "words.csv").write_text("name,value\nfoo,1\nbar,2\n")
    with pytest.raises(ValueError, match="dates"):
        it.load_prices(tmp_path / "words.csv")


def test_bundled_prices_give_the_default_windows_without_gaps():
    cfg = yaml.safe_load((ROOT / "conf/base/parameters_sparse_iht.yml").read_text())[
        "sparse_iht"]["index_tracking"]["real"]
    table = it.load_prices(None)
    assert {"IBM", "AAPL", "MSFT", "^IXIC", "^GSPC"} <= set(table.columns)
    for index in cfg["indices"]:
        data = it.price_returns(table, cfg["assets"], index["column"], tuple(cfg["train"]),
                                tuple(cfg["test"]))
        assert data.X_train.shape == (144, 7) and data.X_test.shape == (66, 7)


def test_every_method_is_feasible_and_no_better_than_the_exhaustive_optimum():
    data, _ = _market(4, assets=8, train=80)
    rows = pd.DataFrame(it.tracking_experiment(data, [2, 3], 1.0, 300, 1000, lasso_alphas=30,
                                               seed=4))
    assert set(rows["method"]) == set(it.METHODS)
    sparse = rows[rows["method"] != "dense_reference"]
    assert (sparse["violation"] <= 1e-12).all() and (sparse["nnz"] <= sparse["k"]).all()
    assert (sparse["gap_best"] >= -1e-9).all()  # R* is the optimum over B0(k) ∩ Γ
    best = rows[rows["method"] == "exhaustive_best"]
    assert np.allclose(best["gap_best"], 0, atol=1e-12)
    dense = rows[rows["method"] == "dense_reference"]
    assert (dense["gap_best"] <= 1e-9).all()  # no sparsity: a lower bound
    assert np.all(np.isfinite(rows[["te_in", "te_out", "objective"]].to_numpy()))


@pytest.mark.parametrize("path,value,message", [
    (("index_tracking", "real", "ks"), [2, 9], r"index_tracking\.real: .*k = 9 is larger"),
    (("index_tracking", "real", "test"), ["2016-01-01", "2022-12-31"],
     "must end before the test window"),
    (("index_tracking", "real", "train"), ["2016-01-01", "2005-01-01"], "start must precede"),
    (("index_tracking", "real", "assets"), ["IBM", "IBM"], "distinct"),
    (("index_tracking", "synthetic", "assets"), 40, r"index_tracking\.synthetic\.assets"),
    (("index_tracking", "ks"), [3, 30], r"index_tracking: .*k = 30 is larger"),
    (("index_tracking", "budget"), 0.0, r"index_tracking\.budget"),
])
def test_index_tracking_parameters_are_validated(path, value, message, assert_refused):
    params = yaml.safe_load((ROOT / "conf/base/parameters_sparse_iht.yml").read_text())[
        "sparse_iht"]
    assert_refused(SparseIHTParams, params, "sparse_iht", path, value, message)
