"""State-dependent noise σ(x), a full covariance Σ, and user-defined laws and landscapes named
in conf as 'module:attr': known answers through the exact solver and Monte Carlo."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import integrate, stats

from icml25.pipelines.sgd_hitting import exact_solver as ex
from icml25.pipelines.sgd_hitting import monte_carlo as mc
from icml25.pipelines.sgd_hitting.critical_points import find_critical_points
from icml25.pipelines.sgd_hitting.landscapes import Target, build_landscape, camel
from icml25.pipelines.sgd_hitting.landscapes import tilted_double_well as l1
from icml25.pipelines.sgd_hitting.noise_laws import NoiseLaw, noise_from_config
from icml25.pipelines.sgd_hitting.predictions import cost_matrix, minima_graph
from icml25.pipelines.sgd_hitting.scaling_fits import scaling_fit
from icml25.pipelines.sgd_hitting.transition_costs import quasi_potential_1d

pytestmark = pytest.mark.usefixtures("one_thread")

HERE = str(Path(__file__).parent)  # holds sgdh_user_pieces.py, the user's module
XM, XS, XG = -0.945649, -0.101031, 1.046681  # L1: spurious minimum, barrier, global minimum
U1 = Target("right_of", threshold=XG - 0.25)
WALLS = (-3.0, 1.2)


@pytest.fixture(scope="module", autouse=True)
def user_module():
    sys.path.insert(0, HERE)
    yield
    sys.path.remove(HERE)
    sys.modules.pop("sgdh_user_pieces", None)


def _sigma(x):
    return 1.0 + 0.25 * np.tanh(x)  # the user's tanh_scale, written again from its definition


def _exact(noise, eta, land=None, x0=XM):
    land = land or l1(0.1)
    return ex.solve_mean(land, noise, eta, U1, x0, ex.default_spacing(noise, eta, walls=WALLS),
                         WALLS)


def _diffusion_mfpt(eta, a=WALLS[0], b=XG - 0.25, n=40_001):
    """Mean first-passage time, in iterations, of dX = -f'(X) dt + √η σ(X) dW (the SGD chain's
    diffusion limit) from XM to b, reflected at a: with Φ' = f'/σ²,
    T = (2/η) ∫_XM^b e^{2Φ(y)/η} ∫_a^y e^{-2Φ(z)/η} / σ(z)² dz dy, by Simpson quadrature."""
    y = np.linspace(a, b, n)
    s2 = _sigma(y) ** 2
    phi = integrate.cumulative_simpson((y**3 - y - 0.1) / s2, x=y, initial=0.0)
    phi -= phi.min()
    inner = integrate.cumulative_simpson(np.exp(-2 * phi / eta) / s2, x=y, initial=0.0)
    k = int(np.searchsorted(y, XM))
    return 2 / eta * integrate.simpson(np.exp(2 * phi[k:] / eta) * inner[k:], x=y[k:]) / eta


# ------------------------------------------------------------------ state-dependent σ(x)
@pytest.fixture(scope="module")
def tanh_noise():
    return noise_from_config({"kind": "gaussian", "scale_fn": "sgdh_user_pieces:tanh_scale"})


def test_state_dependent_cost_is_the_closed_form_integral(tanh_noise):
    # Gaussian with σ(x): p̂ = 2 f'/σ², so V = 2 ∫ f'/σ² (scipy quad, independent of the code)
    expected = integrate.quad(lambda x: 2 * (x**3 - x - 0.1) / _sigma(x) ** 2, XM, XS,
                              epsabs=1e-13)[0]
    assert quasi_potential_1d(l1(0.1), tanh_noise, XM, XS) == pytest.approx(expected, rel=1e-9)
    # and it differs from the constant-σ value 0.31533 (the state dependence matters)
    assert abs(expected - 0.31533) > 0.05


def test_state_dependent_exact_mean_matches_the_diffusion_quadrature(tanh_noise):
    # measured: exact / quadrature = 0.982 at η = 0.06 and 0.981 at η = 0.035
    for eta in (0.06, 0.035):
        assert _exact(tanh_noise, eta) == pytest.approx(_diffusion_mfpt(eta), rel=0.04)


def test_state_dependent_exact_slope_matches_the_cost(tanh_noise):
    etas = [0.027, 0.021]
    fit = scaling_fit(etas, [_exact(tanh_noise, eta) for eta in etas])
    cost = quasi_potential_1d(l1(0.1), tanh_noise, XM, XS)
    assert fit["local_slope"] == pytest.approx(cost, rel=0.01)  # measured 0.4096 vs 0.4103


def test_state_dependent_monte_carlo_matches_the_exact_mean(tanh_noise):
    sample = mc.simulate_hitting_times(l1(0.1), tanh_noise, 0.1, (XM,), U1, 1000, 0, 200_000)
    mean = mc.censored_mean(sample.tau, sample.censored)
    se = mean / math.sqrt(sample.n_hits)  # exponential times: sd = mean
    assert abs(mean - _exact(tanh_noise, 0.1)) < 4 * se


# ------------------------------------------------------------------ user-defined unit laws
def test_a_user_gaussian_reproduces_the_built_in_law_in_both_solvers():
    user = noise_from_config({"kind": "custom", "law": "sgdh_user_pieces:gaussian_law"})
    builtin = NoiseLaw("gaussian")
    assert _exact(user, 0.06) == pytest.approx(_exact(builtin, 0.06), rel=1e-12)
    a = mc.simulate_hitting_times(l1(0.1), user, 0.12, (XM,), U1, 200, 7, 50_000)
    b = mc.simulate_hitting_times(l1(0.1), builtin, 0.12, (XM,), U1, 200, 7, 50_000)
    assert np.array_equal(a.tau, b.tau)
    assert quasi_potential_1d(l1(0.1), user, XM, XS) == pytest.approx(0.31533, rel=1e-4)


@pytest.mark.parametrize(("law", "options"), [("uniform_law", {}),
                                              ("three_point_law", {"w": 0.25})])
def test_user_law_exponent_and_monte_carlo_match_its_cost(law, options):
    """Uniform on [-√3, √3] (continuous, bounded) and {-√2, 0, √2} (atomic), both of unit
    variance: the exact local slope approaches the HJ cost of the law (measured 0.3210 vs
    0.3225 and 0.3200 vs 0.3213), and Monte Carlo agrees with the exact mean."""
    noise = noise_from_config({"kind": "custom", "law": f"sgdh_user_pieces:{law}",
                               "options": options})
    cost = quasi_potential_1d(l1(0.1), noise, XM, XS)
    assert cost > 0.316  # both laws climb more dearly than the Gaussian (0.31533)
    etas = [0.027, 0.021]
    fit = scaling_fit(etas, [_exact(noise, eta) for eta in etas])
    assert fit["local_slope"] == pytest.approx(cost, rel=0.01)
    sample = mc.simulate_hitting_times(l1(0.1), noise, 0.1, (XM,), U1, 800, 1, 200_000)
    mean = mc.censored_mean(sample.tau, sample.censored)
    assert abs(mean - _exact(noise, 0.1)) < 4 * mean / math.sqrt(sample.n_hits)


def test_user_laws_and_callables_are_checked_with_the_key_named():
    with pytest.raises(ValueError, match=r"experiments.x.noise.law: cannot import module"):
        noise_from_config({"kind": "custom", "law": "no_such_module:law"},
                          "experiments.x.noise")
    with pytest.raises(ValueError, match="'module:attr'"):
        noise_from_config({"kind": "gaussian", "scale_fn": "sgdh_user_pieces.tanh_scale"})
    with pytest.raises(ValueError, match="no attribute"):
        noise_from_config({"kind": "custom", "law": "sgdh_user_pieces:nope"})
    with pytest.raises(ValueError, match=r"centred \(E ξ = 0\), got E ξ = 0.1"):
        noise_from_config({"kind": "custom", "law": "sgdh_user_pieces:shifted_uniform_law"})
    with pytest.raises(ValueError, match="non-negative weights summing to 1"):
        noise_from_config({"kind": "custom", "law": "sgdh_user_pieces:three_point_law",
                           "options": {"w": 0.6}})
    with pytest.raises(ValueError, match="positive definite"):
        NoiseLaw("gaussian", covariance=((1.0, 2.0), (2.0, 1.0)))
    with pytest.raises(ValueError, match="Gaussian"):
        NoiseLaw("rademacher", covariance=((1.0,),))
    with pytest.raises(ValueError, match=r"factory.*not a Landscape"):
        build_landscape("custom", {}, "sgdh_user_pieces:not_a_landscape", "landscapes.l9")


def test_the_exact_solver_refuses_a_scale_that_vanishes_somewhere():
    class Vanishing:
        @staticmethod
        def __call__(coords, xp):
            return (xp.abs(coords[0]),)

    noise = NoiseLaw("gaussian", scale_fn=Vanishing(), label="abs")
    with pytest.raises(ValueError, match=r"σ\(x\) = 0 at x = 0.*noise.scale_fn"):
        ex.build_kernel(l1(0.1), noise, 0.1, U1, 0.01, WALLS)


# ------------------------------------------------------------------ full covariance Σ
ANGLE = 0.6
D = np.diag([22.5, 2.5])  # L3a's 10·diag(2.25, 0.25)


def _rot(angle):
    c, s = math.cos(angle), math.sin(angle)
    return np.array([[c, -s], [s, c]])


@pytest.fixture(scope="module")
def rotated():
    """Camel with Σ = R D Rᵀ (full) and the rotated camel f(R y) with D: y = Rᵀ x maps one
    SGD chain onto the other exactly in law."""
    r = _rot(ANGLE)
    full = noise_from_config({"kind": "gaussian", "covariance": (r @ D @ r.T).tolist()})
    diag = noise_from_config({"kind": "gaussian", "scale": np.sqrt(np.diag(D)).tolist()})
    land_b = build_landscape("custom", {"angle": ANGLE}, "sgdh_user_pieces:rotated_camel")
    return r, full, diag, camel(), land_b


def test_full_covariance_costs_equal_the_rotated_landscapes(rotated):
    _, full, diag, land_a, land_b = rotated
    out = {}
    for name, land, noise in (("a", land_a, full), ("b", land_b, diag)):
        g = minima_graph(land, find_critical_points(land, 400))
        costs, _ = cost_matrix(land, g, noise, gmam_options={"n_nodes": 60, "rounds": 4,
                                                              "lbfgs_iter": 20})
        spurious = [k for k in range(len(g.minima)) if k not in g.targets]
        out[name] = sorted(float(np.min(costs[k])) for k in spurious)
    assert len(out["a"]) == 2
    # the discrete action is rotation invariant; the two LBFGS runs stop apart by 6e-4 at this
    # coarse path (60 nodes, 4 rounds)
    assert out["a"] == pytest.approx(out["b"], rel=2e-3)
    # not the unrotated answer: orientation matters (L3a's 0.0574 along the axes)
    assert abs(out["a"][0] - 0.05736) > 0.005


def test_full_covariance_monte_carlo_equals_the_rotated_landscape_in_law(rotated):
    r, full, diag, land_a, land_b = rotated
    x0 = np.array([1.747552, -0.873776])
    ball = Target("ball", center=(0.0, 0.0), radius=0.25)  # rotation invariant
    a = mc.simulate_hitting_times(land_a, full, 0.016, tuple(x0), ball, 400, 0, 200_000)
    b = mc.simulate_hitting_times(land_b, diag, 0.016, tuple(r.T @ x0), ball, 400, 1, 200_000)
    ma, mb = (mc.censored_mean(s.tau, s.censored) for s in (a, b))
    se = math.hypot(ma / math.sqrt(a.n_hits), mb / math.sqrt(b.n_hits))
    assert abs(ma - mb) < 4 * se
    hits_a, hits_b = a.tau[~a.censored], b.tau[~b.censored]
    assert stats.ks_2samp(hits_a, hits_b).pvalue > 1e-3
    # the same Σ with its off-diagonal dropped is another law: the means differ
    unrotated = noise_from_config({"kind": "gaussian",
                                   "scale": np.sqrt(np.diag(r @ D @ r.T)).tolist()})
    c = mc.simulate_hitting_times(land_a, unrotated, 0.016, tuple(x0), ball, 400, 2, 200_000)
    mc_ = mc.censored_mean(c.tau, c.censored)
    assert abs(mc_ - ma) > 4 * math.hypot(ma / math.sqrt(a.n_hits),
                                          mc_ / math.sqrt(c.n_hits))


def test_a_one_by_one_covariance_is_the_scale_in_the_exact_solver():
    a = noise_from_config({"kind": "gaussian", "covariance": [[2.25]]})
    assert _exact(a, 0.06) == pytest.approx(_exact(NoiseLaw("gaussian", (1.5,)), 0.06),
                                            rel=1e-12)


# ------------------------------------------------------------------ through the nodes
def _user_params():
    noise_u = {"kind": "custom", "law": "sgdh_user_pieces:uniform_law"}
    noise_s = {"kind": "gaussian", "scale_fn": "sgdh_user_pieces:tanh_scale"}
    common = {"landscape": "mine", "start_minimum": 0, "walls": [-3.0, 1.2],
              "target": {"kind": "halfline", "radius": 0.25}}
    return {
        "seeds": [0], "progress": False, "n_workers": 1, "n_boot": 0,
        "landscapes": {"mine": {"kind": "custom", "factory": "sgdh_user_pieces:tilted_well",
                                "options": {"tilt": 0.1}}},
        "experiments": {
            "u_exact": {**common, "noise": noise_u, "solver": "exact", "etas": [0.027, 0.021],
                        "compare": "local_slope"},
            "s_exact": {**common, "noise": noise_s, "solver": "exact", "etas": [0.027, 0.021],
                        "compare": "local_slope"},
            "u_mc": {**common, "noise": noise_u, "solver": "mc", "etas": [0.14, 0.12],
                     "n_chains": 200, "max_steps": 100_000},
            "s_mc": {**common, "noise": noise_s, "solver": "mc", "etas": [0.14, 0.12],
                     "n_chains": 200, "max_steps": 100_000},
        },
        "claims": [{"claim": "the user law's slope matches E within 2%", "metric":
                    "u_exact.rel_error", "method": "w_graph", "relation": "better",
                    "threshold": 0.02, "direction": "lower", "test": "exact"}],
    }


def test_user_landscape_and_laws_named_in_conf_run_through_the_nodes():
    from icml25.pipelines.sgd_hitting import nodes

    params = nodes.resolve_parameters(_user_params())
    table = nodes.find_critical_points(params)
    costs = nodes.compute_costs(table, params)
    energies = nodes.compute_energies(costs, table, params)
    expected = integrate.quad(lambda x: 2 * (x**3 - x - 0.1) / _sigma(x) ** 2, XM, XS)[0]
    # (XM, XS are the critical points to 6 digits: 3e-5 of the cost)
    assert energies["s_exact"]["w_graph"] == pytest.approx(expected, rel=1e-4)
    assert energies["u_exact"]["w_graph"] == pytest.approx(
        quasi_potential_1d(l1(0.1), noise_from_config({"kind": "custom", "law":
                           "sgdh_user_pieces:uniform_law"}), XM, XS), rel=1e-4)
    exact = nodes.exact_hitting_times(table, params)
    assert (exact["status"] == "ok").all() and exact["trusted"].all()
    assert (exact["residual"] < 1e-10).all()
    times = nodes.simulate_hitting_times(table, params)
    assert not times["diverged"].any() and (~times["censored"]).mean() > 0.9
    fits = nodes.fit_scaling(times, exact, energies, table, params)
    for name in ("u_exact", "s_exact"):
        assert fits[name]["fits"][0]["local_slope"] == pytest.approx(
            energies[name]["w_graph"], rel=0.01)
    # Monte Carlo at η = 0.12 agrees with the exact mean of the same chain
    for name, noise in (("u_mc", {"kind": "custom", "law": "sgdh_user_pieces:uniform_law"}),
                        ("s_mc", {"kind": "gaussian",
                                  "scale_fn": "sgdh_user_pieces:tanh_scale"})):
        fit = fits[name]["fits"][0]
        k = fit["etas"].index(0.12)
        ref = _exact(noise_from_config(noise), 0.12)
        assert fit["means"][k] == pytest.approx(ref, rel=4 / math.sqrt(190))


def test_conf_errors_name_the_key():
    from icml25.core.params import ParameterError, validate_parameters
    from icml25.pipelines.sgd_hitting.params import SgdHittingParams

    bad = _user_params()
    bad["landscapes"]["mine"]["factory"] = "sgdh_user_pieces:missing"
    with pytest.raises(ParameterError, match=r"landscapes.*mine.*no attribute"):
        validate_parameters(SgdHittingParams, bad, "sgd_hitting")
    bad = _user_params()
    bad["experiments"]["u_exact"]["noise"] = {"kind": "gaussian", "scale": 0.0}
    with pytest.raises(ParameterError, match=r"experiments.u_exact.noise.scale.*σ > 0"):
        validate_parameters(SgdHittingParams, bad, "sgd_hitting")
    bad = _user_params()
    bad["experiments"]["u_mc"]["noise"] = {"kind": "gaussian", "covariance": [[1, 0], [0, 1]]}
    with pytest.raises(ParameterError, match=r"u_mc.noise.covariance: 2×2 for a 1-[dD]"):
        validate_parameters(SgdHittingParams, bad, "sgd_hitting")
