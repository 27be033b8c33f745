"""Target functions, σ(x) and noise laws from conf (built-in or a "module:attr" callable):
known answers against closed forms, the sample-level simulator, and clear errors."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from icml25.core.params import ParameterError, validate_parameters
from icml25.pipelines.distributed_estimation import functions as F
from icml25.pipelines.distributed_estimation import nodes
from icml25.pipelines.distributed_estimation.params import DistributedEstimationParams

EX = "icml25.pipelines.distributed_estimation.example_callables"
NAME = "distributed_estimation"


def test_a_callable_target_reproduces_d1():
    f = F.base_function("callable", 1.0, ref=f"{EX}:d1")
    assert np.allclose(f, F.d1_cells(), atol=1e-12)


def test_sigma_from_conf_polynomial_and_callable():
    x = F.cell_midpoints()
    assert np.allclose(F.sigma_cells([0.3, 0.4]), 0.3 + 0.4 * x, atol=1e-15)
    assert np.allclose(F.sigma_cells(f"{EX}:sigma_sqrt"), 0.2 + 0.5 * np.sqrt(x), atol=1e-15)
    assert np.all(F.sigma_cells(0.5) == 0.5)
    with pytest.raises(ValueError, match="must be finite and > 0"):
        F.sigma_cells([0.1, -0.5], key="models.h.sigma")


def test_a_user_gaussian_law_equals_the_closed_form_heteroskedastic_model():
    g = F.d2_cells(0.5)
    built_in = F.make_model("heteroskedastic", g)
    spec = F.ModelSpec("law", law=f"{EX}:gaussian_law", clip=(built_in.lo, built_in.hi))
    user = F.make_model("h_user", g, spec=spec)
    # ∫ sf by composite Gauss-Legendre against the closed-form clipped normal mean
    assert np.abs(user.rounding_probability() - built_in.rounding_probability()).max() < 1e-10
    # the default clip of a user law: its quantiles at Φ(∓3), the extremes of f ∓ 3σ(x)
    auto = F.make_model("h_auto", g, spec=F.ModelSpec("law", law=f"{EX}:gaussian_law"))
    sigma = 0.3 + 0.4 * F.cell_midpoints()
    assert (auto.lo, auto.hi) == pytest.approx(((g - 3 * sigma).min(), (g + 3 * sigma).max()),
                                               abs=1e-9)


def test_a_user_poisson_law_equals_the_built_in_poisson_model():
    g = F.d2_cells(0.5)
    built_in = F.make_model("poisson", g)
    spec = F.ModelSpec("law", law=f"{EX}:poisson_law", target_range=(1.0, 5.0),
                       clip=(built_in.lo, built_in.hi))
    user = F.make_model("p_user", g, spec=spec)
    assert np.abs(user.rounding_probability() - built_in.rounding_probability()).max() < 1e-12


def test_poisson_counts_without_rescaling_have_the_exact_clipped_mean():
    g = F.d2_cells(0.5)
    tm = F.make_model("counts", g, spec=F.ModelSpec("poisson"))
    assert np.array_equal(tm.f, g)  # the function itself is the Poisson mean
    assert tm.lo == 0 and tm.hi == np.ceil(g.max() + 3 * np.sqrt(g.max()))
    # E[min(Y, hi)] = Σ_y min(y, hi)·pmf(y), summed directly over y = 0..199
    from scipy import stats
    y = np.arange(200)
    cells = np.array([0, 5000, 16383])
    direct = (np.minimum(y, tm.hi)[None, :] * stats.poisson.pmf(y[None, :], g[cells, None])
              ).sum(axis=1)
    assert np.allclose(tm.clipped_mean()[cells], direct, rtol=1e-12)


USER_MODELS = {
    "nb_counts": F.ModelSpec("law", law=f"{EX}:negative_binomial_counts"),
    "sqrt_noise": F.ModelSpec("gaussian", sigma=f"{EX}:sigma_sqrt"),
    "counts": F.ModelSpec("poisson"),
}


@pytest.mark.parametrize("name", sorted(USER_MODELS))
def test_user_models_symbol_distribution_matches_sample_level_frequencies(name):
    tm = F.make_model(name, F.d2_cells(0.5), spec=USER_MODELS[name])
    k, size = 8, 200_000
    p = tm.symbol_distribution(k)
    assert p.sum() == pytest.approx(1.0) and p.min() >= 0
    freq = np.bincount(tm.sample_symbols(k, (size,), np.random.default_rng(1)),
                       minlength=p.size) / size
    se = np.sqrt(p * (1 - p) / size)
    assert np.all(np.abs(freq - p) < 4 * se + 1e-12)


@pytest.mark.parametrize("name,a", [("nb_counts", 1.5), ("sqrt_noise", 0.7), ("counts", 2.0)])
def test_user_regression_reduction_is_unbiased_for_a_constant(name, a):
    tm = F.make_model(name, np.full(F.FINE_CELLS, a), spec=USER_MODELS[name])
    if name == "sqrt_noise":
        assert tm.sigma.max() == pytest.approx(0.7, abs=1e-3)
    k, m = 4, 40_000
    sym = tm.sample_symbols(k, (m,), np.random.default_rng(2))
    p_hat = np.bincount(sym, minlength=2 * k) / m
    f_hat = tm.lo + (tm.hi - tm.lo) * k * p_hat[1::2]
    se = (tm.hi - tm.lo) * k * np.sqrt(p_hat[1::2] * (1 - p_hat[1::2]) / m)
    # the clipping bias at z = 3 is below 3e-3 for these laws
    assert np.all(np.abs(f_hat - a) < 3 * se + 3e-3)
    # and the exact symbol distribution decodes to the clipped mean, E[clip(Y)]
    exact = tm.decode(tm.symbol_distribution(k), k)
    assert np.allclose(exact, tm.clipped_mean().mean(), rtol=1e-12)


def _params(**extra) -> dict:
    base = {"seeds": [0], "functions": {"bump": {"kind": "callable", "s": 1.0,
                                                 "callable": f"{EX}:bump"}},
            "models": {"nb": {"noise": "law", "law": f"{EX}:negative_binomial_counts"},
                       "density": {"noise": "density"}},
            "grid": {"k_log2_max": 3}, "sim": {"base_seed": 1},
            "sweeps": {"r": {"role": "regression", "function": "bump", "model": "nb",
                             "axis": "n", "m": [64], "n": [1, 4], "l": [2],
                             "protocols": ["layered", "bf", "at", "full"]}},
            "claims": [{"claim": "x", "metric": "y", "method": "layered", "relation": "better",
                        "threshold": 1, "direction": "lower"}]}
    base.update(extra)
    return base


def test_conf_models_flow_through_the_true_functions_table():
    table = nodes.make_functions(_params())
    assert set(table["noise"]) == {"law"}
    f = table["f"].to_numpy()
    assert np.allclose(f, F.callable_cells(F.resolve_callable(f"{EX}:bump", "x")), atol=1e-12)
    model = nodes.models_from_table(table)[("bump", "nb")]
    again = F.make_model("nb", f, spec=USER_MODELS["nb_counts"])
    assert model.law == again.law and (model.lo, model.hi) == (again.lo, again.hi)
    assert np.allclose(model.symbol_distribution(8), again.symbol_distribution(8), atol=1e-14)
    rates, _ = nodes.theory_grid(table, _params())
    assert np.isfinite(rates["r_th"]).all()


def test_conf_errors_name_the_parameter():
    validate_parameters(DistributedEstimationParams, _params(), NAME)
    bad = _params(functions={"bump": {"kind": "callable", "s": 1.0, "callable": f"{EX}:nope"}})
    with pytest.raises(ParameterError, match=r"functions\.bump\.callable.*no attribute"):
        validate_parameters(DistributedEstimationParams, bad, NAME)
    bad = _params(models={"nb": {"noise": "law"}})
    with pytest.raises(ParameterError, match=r"models\.nb.*law"):
        validate_parameters(DistributedEstimationParams, bad, NAME)
    bad = _params(models={"nb": {"noise": "gaussian", "sigma": "no_such_module:f"}})
    with pytest.raises(ParameterError, match=r"models\.nb\.sigma.*cannot import"):
        validate_parameters(DistributedEstimationParams, bad, NAME)
    bad = _params(models={"nb": {"noise": "poisson", "range": [5, 1]}})
    with pytest.raises(ParameterError, match=r"models\.nb\.range"):
        validate_parameters(DistributedEstimationParams, bad, NAME)
    bad = _params(models={"density": {"noise": "density"}})
    with pytest.raises(ParameterError, match=r"sweeps\.r\.model 'nb' is not one of models"):
        validate_parameters(DistributedEstimationParams, bad, NAME)
    bad = _params(models={"nb": {"noise": "density"}})
    with pytest.raises(ParameterError, match=r"role regression needs a regression model"):
        validate_parameters(DistributedEstimationParams, bad, NAME)


def test_model_errors_name_the_model():
    with pytest.raises(ValueError, match=r"models\.b: binary Y needs f in \[0, 1\]"):
        F.make_model("b", F.d2_cells(0.5), spec=F.ModelSpec("bernoulli"))
    with pytest.raises(ValueError, match=r"models\.d: a density must stay above 0"):
        F.make_model("d", F.d1_cells() - 1.0, spec=F.ModelSpec("density"))
    with pytest.raises(ValueError, match="same shape"):
        F.callable_cells(lambda x: np.ones(3), key="functions.f.callable")
    with pytest.raises(ValueError, match="form 'module:attr'"):
        F.resolve_callable("numpy.cos", "functions.f.callable")
    table = pd.DataFrame({"function": "d2", "model": "x", "s": 0.5, "cell": [0, 1],
                          "f": [1.0, 1.0], "sigma": np.nan, "lo": 0.0, "hi": 1.0,
                          "noise": "magic", "law": ""})
    with pytest.raises(ValueError, match="unknown noise"):
        nodes.models_from_table(table)
