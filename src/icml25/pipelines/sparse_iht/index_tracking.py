"""Index tracking: a sparse non-negative portfolio that follows an index.

``min R(w) = (1/2T) ||Xw - y||²`` s.t. ``w >= 0``, ``Σ_i w_i <= B``, ``||w||_0 <= k``, where the
rows of ``X`` are the assets' period returns and ``y`` the index's. The budget set
``{w >= 0, Σw <= B}`` is support-preserving, so IHT-2SP applies as it stands (the paper's
Section 2 lists it among its examples). Every method is compared with the exhaustive optimum
``R*`` over ``B0(k) ∩ Γ`` (:func:`best_budget_portfolios`, exact for small numbers of assets),
in sample, and by its annualised tracking error ``std(Xw - y)·√(periods per year)`` in and out of
sample.

Two kinds of data: a generated factor-model market (:func:`synthetic_market`, any size, one
instance per seed), and real prices (:func:`price_returns`): by default the monthly prices of
seven stocks and of the NASDAQ Composite and S&P 500 indices that matplotlib ships as its sample
``Stocks.csv``, or any price table of the same layout (``path``). Only the training window is
used to fit, warm-start or choose anything; the test window is only evaluated.
"""

from __future__ import annotations

import itertools
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from icml25.pipelines.sparse_iht import algorithms as alg
from icml25.pipelines.sparse_iht.baselines import lasso_baselines, omp_project
from icml25.pipelines.sparse_iht.problems import LeastSquares
from icml25.pipelines.sparse_iht.projections import Constraint, feasibility_violation

#: Methods of the tracking experiment, in report order (``exhaustive_best`` is ``R*`` itself).
METHODS = ("iht_2sp", "iht_2sp_warm", "iht_then_project", "exact_iht", "lasso", "lasso_refit",
           "omp_project", "dense_reference", "exhaustive_best")


@dataclass(frozen=True)
class TrackingData:
    """Asset returns ``X`` and index returns ``y``, split into a training and a test window."""

    name: str
    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    assets: tuple[str, ...]
    periods_per_year: float

    def __post_init__(self) -> None:
        for part in ("train", "test"):
            X, y = getattr(self, f"X_{part}"), getattr(self, f"y_{part}")
            if X.ndim != 2 or X.shape[1] != len(self.assets) or y.shape != (X.shape[0],):
                raise ValueError(f"{self.name}: {part} returns X {X.shape} and index y {y.shape} "
                                 f"do not match {len(self.assets)} assets")
            if X.shape[0] < 2:
                raise ValueError(f"{self.name}: the {part} window has {X.shape[0]} periods; "
                                 "at least 2 are needed")
            if not (np.all(np.isfinite(X)) and np.all(np.isfinite(y))):
                raise ValueError(f"{self.name}: the {part} returns contain NaN or inf")


def synthetic_market(assets: int, factors: int, train: int, test: int, index_noise: float,
                     seed: int, periods_per_year: float = 252.0) -> TrackingData:
    """A factor-model market: ``r_t = B f_t + e_t`` with a market factor (loadings
    ``U(0.5, 1.5)``, daily volatility 1 %) and ``factors - 1`` style factors (loadings ``N(0, 1)``,
    volatility 0.5 %), idiosyncratic volatilities ``U(0.5 %, 2 %)``; the index holds every asset
    with Dirichlet(1) weights and tracks them up to ``index_noise`` (assets outside the
    universe), ``y_t = r_tᵀ w_idx + index_noise · ε_t``. The first ``train`` periods train, the
    next ``test`` test."""
    if assets < 2 or factors < 1 or train < 2 or test < 2 or index_noise < 0:
        raise ValueError(f"synthetic market: got assets={assets}, factors={factors}, "
                         f"train={train}, test={test}, index_noise={index_noise}")
    rng = np.random.default_rng(seed)
    T = train + test
    loadings = np.column_stack([rng.uniform(0.5, 1.5, assets),
                                rng.standard_normal((assets, factors - 1))])
    vol = np.array([0.01] + [0.005] * (factors - 1))
    f = rng.standard_normal((T, factors)) * vol
    idio = rng.uniform(0.005, 0.02, assets)
    X = f @ loadings.T + rng.standard_normal((T, assets)) * idio
    w_index = rng.dirichlet(np.ones(assets))
    y = X @ w_index + index_noise * rng.standard_normal(T)
    names = tuple(f"a{i:02d}" for i in range(assets))
    return TrackingData("synthetic", X[:train], y[:train], X[train:], y[train:], names,
                        periods_per_year)


def bundled_prices_path() -> Path:
    """matplotlib's sample ``Stocks.csv`` (monthly adjusted closes 1990-2022 of IBM, AAPL, MSFT,
    XRX, AMZN, DELL, GOOGL, ADBE and the ^GSPC and ^IXIC indices), shipped in its wheel."""
    from matplotlib import cbook
    return Path(cbook.get_sample_data("Stocks.csv", asfileobj=False))


def load_prices(path: str | Path | None = None) -> pd.DataFrame:
    """A price table: dates in the first column, one column per asset or index (``#`` lines are
    comments); ``None`` reads matplotlib's bundled sample."""
    path = bundled_prices_path() if path is None else Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"index_tracking.real.path: no price table at {path}")
    try:
        with warnings.catch_warnings():  # a non-date column is refused below, not warned about
            warnings.simplefilter("ignore", UserWarning)
            prices = pd.read_csv(path, comment="#", index_col=0, parse_dates=True)
    except (ValueError, pd.errors.ParserError) as err:
        raise ValueError(f"{path}: not a price table (dates, then one column per asset): "
                         f"{err}") from None
    if not isinstance(prices.index, pd.DatetimeIndex):
        raise ValueError(f"{path}: the first column must hold dates")
    return prices.sort_index()


def price_returns(prices: pd.DataFrame, assets: list[str], index: str, train: tuple[str, str],
                  test: tuple[str, str], frequency: str | None = "ME",
                  periods_per_year: float = 12.0, name: str = "real",
                  source: str = "prices") -> TrackingData:
    """Period returns (last price of each ``frequency`` period, ``pct_change``) of ``assets`` and
    ``index``, split into the ``train`` and ``test`` date windows (inclusive); ``frequency=None``
    takes the table's rows as the periods (daily prices, say). The first return of the training
    window uses the price of the period before it, so no window is lost."""
    missing = [c for c in [*assets, index] if c not in prices.columns]
    if missing:
        raise ValueError(f"{source}: no column {missing} (columns: {list(prices.columns)})")
    (a, b), (c, d) = (pd.Timestamp(x) for x in train), (pd.Timestamp(x) for x in test)
    if not a < b < c <= d:
        raise ValueError(f"index_tracking: the windows must be ordered train {train} before "
                         f"test {test}")
    per = prices[[*assets, index]]
    per = per if frequency is None else per.resample(frequency).last()
    returns = per.pct_change(fill_method=None).loc[a:d]
    gaps = returns.isna().any()
    if gaps.any():
        first = {col: str(returns.index[returns[col].isna()][0].date())
                 for col in gaps.index[gaps]}
        raise ValueError(f"{source}: missing prices inside {a.date()}..{d.date()} for "
                         f"{first} (column: first period without a return); choose assets "
                         "or windows without gaps")
    tr, te = returns.loc[a:b], returns.loc[c:d]
    return TrackingData(name, tr[assets].to_numpy(float), tr[index].to_numpy(float),
                        te[assets].to_numpy(float), te[index].to_numpy(float), tuple(assets),
                        periods_per_year)


def tracking_error(X: np.ndarray, y: np.ndarray, w: np.ndarray, periods_per_year: float) -> float:
    """Annualised tracking error ``std(Xw - y) · √(periods per year)`` (sample std, ddof = 1)."""
    return float(np.std(X @ w - y, ddof=1) * math.sqrt(periods_per_year))


def best_budget_portfolios(problem: LeastSquares, ks: list[int], budget: float,
                           max_subsets: int = 2_000_000) -> dict[int, tuple[np.ndarray, float]]:
    """Exhaustive ``R*(k) = min R`` over ``{w >= 0, Σw <= B, ||w||_0 <= k}`` for each ``k``.

    The minimiser has some positive support ``P`` with ``|P| <= k``; on ``P`` the bounds
    ``w > 0`` are inactive, so it is either the least-squares solution on ``P`` (budget slack)
    or the least-squares solution on ``P`` with ``Σw = B`` (budget active). Both closed forms
    are computed for every subset of at most ``k_max`` assets (batched solves with ``G_P``,
    ``G = XᵀX/T``); those that are feasible (strictly positive, within the budget) are feasible
    points, and the optimum is among them, so their minimum is ``R*``. ``w = 0`` is included.
    Requires ``G_P`` non-singular (more periods than assets, no collinear returns).
    """
    ks = sorted(set(int(k) for k in ks))
    d, n = problem.d, problem.n
    if not ks or ks[0] < 1 or ks[-1] > d:
        raise ValueError(f"ks {ks}: expected sparsity levels between 1 and {d} assets")
    if not budget > 0:
        raise ValueError(f"budget {budget}: expected a positive budget")
    count = sum(math.comb(d, j) for j in range(1, ks[-1] + 1))
    if count > max_subsets:
        raise ValueError(f"exhaustive search over {count} subsets of {d} assets (k <= "
                         f"{ks[-1]}) exceeds max_subsets = {max_subsets}")
    G = problem.X.T @ problem.X / n
    c = problem.X.T @ problem.y / n
    const = float(problem.y @ problem.y) / (2 * n)
    best_by_size = [(const, np.zeros(d))]  # size 0: w = 0
    for j in range(1, ks[-1] + 1):
        P = np.array(list(itertools.combinations(range(d), j)))
        GP = G[P[:, :, None], P[:, None, :]]
        rhs = np.stack([c[P], np.ones_like(c[P])], axis=-1)
        try:
            sol = np.linalg.solve(GP, rhs)
        except np.linalg.LinAlgError:
            raise ValueError(f"exhaustive search: a {j}-asset Gram matrix is singular (fewer "
                             "periods than assets, or collinear returns)") from None
        u, v = sol[..., 0], sol[..., 1]  # G_P⁻¹ c_P and G_P⁻¹ 1
        nu = (u.sum(1) - budget) / v.sum(1)
        candidates = np.concatenate([u, u - nu[:, None] * v])  # slack, then active budget
        ok = np.all(candidates > 0, axis=1) & (candidates.sum(1) <= budget * (1 + 1e-12))
        if not ok.any():
            continue
        supports = np.concatenate([P, P])[ok]
        cand = candidates[ok]
        Gc = np.concatenate([GP, GP])[ok]
        cc = np.concatenate([c[P], c[P]])[ok]
        values = 0.5 * np.einsum("mi,mij,mj->m", cand, Gc, cand) - np.sum(cc * cand, 1) + const
        i = int(np.argmin(values))
        w = np.zeros(d)
        w[supports[i]] = cand[i]
        best_by_size.append((float(values[i]), w))
    out = {}
    for k in ks:
        # the best over every size up to k, re-evaluated from the residual (no cancellation)
        w = min(best_by_size[: k + 1], key=lambda item: item[0])[1]
        out[k] = (w, problem.value(w))
    return out


def tracking_experiment(data: TrackingData, ks: list[int], budget: float, iterations: int,
                        dense_iterations: int, lasso_alphas: int = 300,
                        seed: int | None = None) -> list[dict]:
    """Every method at every ``k`` on one instance: in-sample objective and its gap to ``R*``,
    tracking error in and out of sample, non-zeros, feasibility.

    The fit uses the training window rescaled by the index's training volatility (the
    minimiser is invariant to a common scale of ``X`` and ``y``; it keeps the convex solvers'
    tolerances meaningful on returns of order 1e-2); objectives are reported in the original
    units. ``iht_2sp_warm`` starts from the dense budget-constrained fit of the training window.
    """
    s = float(np.std(data.y_train))
    if not s > 0:
        raise ValueError(f"{data.name}: the index has no variation in the training window")
    problem = LeastSquares(data.X_train / s, data.y_train / s)
    gamma = Constraint("nonneg_budget", budget=budget)
    ks = [k for k in ks if k <= problem.d]
    if not ks:
        raise ValueError(f"{data.name}: every k exceeds the {problem.d} assets")
    dense = alg.dense_reference(problem, gamma, dense_iterations)
    lasso = lasso_baselines(problem, gamma, ks, lasso_alphas)
    best = best_budget_portfolios(problem, ks, budget)
    rows = []
    for k in ks:
        w_best, r_best = best[k]
        points = {
            "iht_2sp": alg.iht_2sp(problem, k, gamma, iterations).w,
            "iht_2sp_warm": alg.iht_2sp(problem, k, gamma, iterations, w0=dense.w).w,
            "iht_then_project": alg.iht_then_project(problem, k, gamma, iterations).w,
            "exact_iht": alg.exact_projection_iht(problem, k, gamma, iterations).w,
            "lasso": lasso[k][0], "lasso_refit": lasso[k][1],
            "omp_project": omp_project(problem, k, gamma), "dense_reference": dense.w,
            "exhaustive_best": w_best,
        }
        for method, w in points.items():
            value = problem.value(w)
            rows.append({
                "dataset": data.name, "seed": seed, "k": k, "method": method,
                "objective": value * s**2, "best_objective": r_best * s**2,
                "gap_best": (value - r_best) / r_best,
                "te_in": tracking_error(data.X_train, data.y_train, w, data.periods_per_year),
                "te_out": tracking_error(data.X_test, data.y_test, w, data.periods_per_year),
                "nnz": int(np.count_nonzero(w)), "weight_sum": float(w.sum()),
                "violation": feasibility_violation(
                    w, problem.d if method == "dense_reference" else k, gamma),
                "assets": ",".join(a for a, x in zip(data.assets, w, strict=True) if x != 0),
            })
    return rows
