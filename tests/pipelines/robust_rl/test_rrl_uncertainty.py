"""Support functions: each dual form equals a direct primal solve; the invariants every support
function must satisfy; radii outside their valid range are refused."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog, minimize

from icml25.pipelines.robust_rl.uncertainty import (
    UncertaintyError,
    UncertaintySet,
    check_radius,
    divergence,
    sigma_tv,
    sigma_tv_dual,
)

KINDS = [("contamination", 0.3), ("tv", 0.25), ("chi2", 0.5), ("kl", 0.2)]


def _cases(n: int, seed: int = 0, zeros: bool = True):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        p = rng.dirichlet(np.ones(6))
        if zeros:
            p[rng.random(6) < 0.3] = 0.0
            if p.sum() == 0:
                p[0] = 1.0
            p /= p.sum()
        yield p, rng.normal(size=6) * rng.uniform(0.5, 5.0)


def _tv_lp(p, V, rho):
    """min q.V s.t. q in simplex, sum t <= 2 rho, -t <= q - p <= t (split variables)."""
    S = p.size
    c = np.concatenate([V, np.zeros(S)])
    eye = np.eye(S)
    A_ub = np.block([[eye, -eye], [-eye, -eye], [np.zeros((1, S)), np.ones((1, S))]])
    b_ub = np.concatenate([p, -p, [2 * rho]])
    A_eq = np.concatenate([np.ones(S), np.zeros(S)])[None]
    res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=[1.0],
                  bounds=[(0, None)] * (2 * S), method="highs")
    assert res.success
    return res.fun


def _contamination_lp(p, V, R):
    """min over q = (1 - R) p + R u, u in simplex, as an LP in u."""
    res = linprog(R * V, A_eq=np.ones((1, p.size)), b_eq=[1.0], bounds=[(0, None)] * p.size,
                  method="highs")
    return (1 - R) * p @ V + res.fun


def _slsqp(p, V, kind, rho, starts=4, seed=0):
    """Primal min q.V over the chi2 / KL ball on the support of p, SLSQP from several starts."""
    rng = np.random.default_rng(seed)
    sup = p > 0
    ps, Vs = p[sup], V[sup]
    if kind == "chi2":
        def div(q):
            return np.sum((q - ps) ** 2 / ps)
    else:
        def div(q):
            q = np.clip(q, 1e-300, None)
            return np.sum(q * np.log(q / ps))
    best = np.inf
    for k in range(starts):
        x0 = ps if k == 0 else (ps + rng.dirichlet(np.ones(ps.size)) * 0.2) / 1.2
        res = minimize(lambda q: q @ Vs, x0, method="SLSQP", bounds=[(0, 1)] * ps.size,
                       constraints=[{"type": "eq", "fun": lambda q: q.sum() - 1},
                                    {"type": "ineq", "fun": lambda q: rho - div(q)}],
                       options={"ftol": 1e-13, "maxiter": 500})
        if res.success and div(res.x) <= rho + 1e-8 and abs(res.x.sum() - 1) < 1e-8:
            best = min(best, res.fun)
    return best


@pytest.mark.parametrize("rho", [0.05, 0.2, 0.6, 1.0])
def test_tv_dual_equals_linprog(rho):
    for p, V in _cases(10, seed=1):
        lp = _tv_lp(p, V, rho)
        assert UncertaintySet("tv", rho).sigma(p, V) == pytest.approx(lp, abs=1e-7)
        assert sigma_tv_dual(p, V, rho) == pytest.approx(lp, abs=1e-7)


@pytest.mark.parametrize("R", [0.0, 0.2, 0.7, 1.0])
def test_contamination_closed_form_equals_lp(R):
    for p, V in _cases(10, seed=2):
        assert UncertaintySet("contamination", R).sigma(p, V) == pytest.approx(
            _contamination_lp(p, V, R), abs=1e-9)


@pytest.mark.parametrize(("kind", "rho"), [("chi2", 0.1), ("chi2", 0.5), ("kl", 0.05),
                                           ("kl", 0.5)])
def test_chi2_and_kl_duals_equal_slsqp(kind, rho):
    for p, V in _cases(4, seed=3):
        primal = _slsqp(p, V, kind, rho)
        assert UncertaintySet(kind, rho).sigma(p, V) == pytest.approx(primal, abs=1e-4)


def test_chi2_and_kl_cannot_leave_the_support_but_tv_can():
    p = np.array([0.5, 0.5, 0.0])
    V = np.array([1.0, 2.0, -10.0])
    for kind, rho in (("chi2", 5.0), ("kl", 5.0)):
        assert UncertaintySet(kind, rho).sigma(p, V) >= 1.0 - 1e-9  # never below the support
    assert UncertaintySet("tv", 0.5).sigma(p, V) == pytest.approx(-10 * 0.5 + 0.5)


def test_vectorised_rows_match_row_by_row():
    rng = np.random.default_rng(4)
    P = rng.dirichlet(np.ones(7), size=(5, 3))
    V = rng.normal(size=7)
    for kind, rho in KINDS:
        u = UncertaintySet(kind, rho)
        rows = np.array([[u.sigma(P[s, a], V) for a in range(3)] for s in range(5)])
        np.testing.assert_allclose(u.sigma(P, V), rows, atol=1e-10)


@pytest.mark.parametrize(("kind", "rho"), KINDS)
def test_support_function_invariants(kind, rho):
    u = UncertaintySet(kind, rho)
    rng = np.random.default_rng(5)
    for p, V in _cases(20, seed=6):
        s = u.sigma(p, V)
        support_min = V[p > 0].min()
        low = support_min if kind in ("chi2", "kl") else V.min()
        assert low - 1e-9 <= s <= p @ V + 1e-9  # min V <= sigma <= p.V
        c = rng.normal() * 10
        assert u.sigma(p, V + c) == pytest.approx(s + c, abs=1e-10 if kind in (
            "contamination", "tv") else 1e-7)  # translation equivariance
        W = V + np.abs(rng.normal(size=V.size))  # W >= V
        assert u.sigma(p, W) >= s - 1e-9  # monotone
        lam = rng.random()
        mix = u.sigma(p, lam * V + (1 - lam) * W)
        assert mix >= lam * s + (1 - lam) * u.sigma(p, W) - 1e-7  # concave
        assert UncertaintySet(kind, 0.0).sigma(p, V) == pytest.approx(p @ V, abs=1e-12)


def test_translation_equivariance_exact_for_tv_and_contamination():
    for p, V in _cases(10, seed=7, zeros=False):
        for kind, rho in KINDS[:2]:
            u = UncertaintySet(kind, rho)
            assert abs(u.sigma(p, V + 3.25) - u.sigma(p, V) - 3.25) < 1e-10


@pytest.mark.parametrize(("kind", "rho"), KINDS)
def test_sampled_members_lie_in_the_ball(kind, rho):
    rng = np.random.default_rng(8)
    P = rng.dirichlet(np.ones(6), size=(4, 2))
    P[0, 0] = [0.5, 0.5, 0, 0, 0, 0]
    Q = UncertaintySet(kind, rho).sample_member(P, rng)
    np.testing.assert_allclose(Q.sum(-1), 1.0)
    assert (Q >= 0).all()
    assert (divergence(kind, Q, P) <= rho + 1e-9).all()
    V = rng.normal(size=6)
    # every member's value is at least the worst case
    assert (np.einsum("sat,t->sa", Q, V) >= UncertaintySet(kind, rho).sigma(P, V) - 1e-7).all()


@pytest.mark.parametrize(("kind", "radius", "message"), [
    ("tv", 1.5, r"tv radius must lie in \[0, 1\]"),
    ("contamination", -0.1, "contamination radius must be finite and >= 0"),
    ("kl", float("nan"), "kl radius must be finite"),
    ("chi2", -1.0, "chi2 radius must be finite and >= 0"),
    ("wasserstein", 0.1, "unknown"),
])
def test_invalid_radius_is_refused(kind, radius, message):
    with pytest.raises(UncertaintyError, match=message):
        check_radius(kind, radius)
    with pytest.raises(UncertaintyError, match=message):
        UncertaintySet(kind, radius)


def test_tv_greedy_moves_mass_to_the_minimum():
    p = np.array([0.1, 0.2, 0.3, 0.4])
    V = np.array([0.0, 1.0, 2.0, 3.0])
    # move 0.3 from the top (state 3) to state 0: q = [0.4, 0.2, 0.3, 0.1]
    assert sigma_tv(p, V, 0.3) == pytest.approx(0.2 + 0.6 + 0.3)
    # radius larger than the mass outside the minimum: everything ends at min V
    assert sigma_tv(p, V, 1.0) == pytest.approx(0.0)
