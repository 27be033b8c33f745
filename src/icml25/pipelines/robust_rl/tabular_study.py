"""The tabular study: ground truth, the reduction and its baselines over a grid of sample sizes,
and exact evaluation of every returned policy (docs/papers/robust_rl.md, "Metrics").

Every policy is judged by its exact robust gain under the set centred at the TRUE kernel ``P0``
(robust RVI with that policy fixed); the robust optimality gap is ``g* - g^pi``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from tqdm.auto import tqdm

from icml25.core.mdp import TabularMDP, policy_gain, relative_value_iteration
from icml25.pipelines.robust_rl.reduction import (
    empirical_kernel,
    nonrobust_plugin_policy,
    reduction_discount,
    reduction_policy,
    robust_rvi_policy,
    robust_rvi_q_learning,
)
from icml25.pipelines.robust_rl.robust_planning import (
    robust_gain,
    robust_relative_value_iteration,
    span,
)
from icml25.pipelines.robust_rl.uncertainty import UncertaintySet

REDUCTION = "reduction_eps{eps:g}"
FIXED = "fixed_gamma_{gamma:g}"
ROBUST_RVI = "robust_rvi_phat"
PLUGIN = "nonrobust_plugin"
QLEARNING = "robust_rvi_qlearning"


def ground_truth(mdp: TabularMDP, uset: UncertaintySet, tol: float = 1e-10) -> dict:
    """``g*``, ``h*``, ``pi*`` of the robust average problem centred at ``P0``, with ``Sp(h*)``,
    and the nominal optimal policy's gains (how far robust and nominal policies are apart)."""
    g, h, pi = robust_relative_value_iteration(mdp.P, mdp.r, uset, tol=tol)
    g_nom, _, pi_nom = relative_value_iteration(mdp.P, mdp.r, tol=tol)
    g_nom_robust = robust_gain(mdp.P, mdp.r, uset, pi_nom, tol=tol)
    return {"g_star": g, "h_star": h.tolist(), "pi_star": pi.tolist(), "span_h_star": span(h),
            "nominal_gain_opt": g_nom, "nominal_policy_robust_gain": g_nom_robust,
            "robust_vs_nominal_gap": g - g_nom_robust}


@dataclass
class PolicyEvaluator:
    """Exact robust (and nominal) gains of policies on the true model, cached by policy."""

    mdp: TabularMDP
    uset: UncertaintySet
    tol: float = 1e-10
    _cache: dict = field(default_factory=dict)

    def __call__(self, policy: np.ndarray) -> tuple[float, float]:
        key = np.asarray(policy, dtype=np.int64).tobytes()
        if key not in self._cache:
            g_rob = robust_gain(self.mdp.P, self.mdp.r, self.uset, policy, tol=self.tol)
            g_nom = float(np.mean(policy_gain(self.mdp.P, self.mdp.r, policy, tol=1e-11)))
            self._cache[key] = (g_rob, g_nom)
        return self._cache[key]


def sampled_kernel_gains(mdp: TabularMDP, uset: UncertaintySet, policy: np.ndarray,
                         n_kernels: int, rng: np.random.Generator) -> np.ndarray:
    """Average reward of ``policy`` under ``n_kernels`` random members of the set around ``P0``."""
    return np.array([float(np.mean(policy_gain(uset.sample_member(mdp.P, rng), mdp.r, policy,
                                               tol=1e-11)))
                     for _ in range(n_kernels)])


@dataclass(frozen=True)
class StudyConfig:
    """Settings of one tabular study (see ``parameters_robust_rl.yml``, ``tabular``)."""

    eps: Sequence[float]
    gamma_fixed: Sequence[float]
    H: float | None  # None: estimate c_H Sp(h_hat*) on each empirical model
    c_H: float
    drvi_tol: float
    rrvi_tol: float
    qlearning: bool = True
    q_step_power: float = 0.7


def sample_empirical_models(mdp: TabularMDP, N_grid: Sequence[int], seeds: Sequence[int],
                            stream: int = 0, progress: bool = False) -> dict[tuple[int, int],
                                                                              np.ndarray]:
    """``{(N, seed): P_hat}``: ``N`` generative samples per (s, a) from the true ``P0``. Every
    method and uncertainty set of one ``(N, seed)`` plans on the same ``P_hat``."""
    out = {}
    for n_idx, N in enumerate(tqdm(N_grid, desc=f"sampling {mdp.name}", disable=not progress,
                                   leave=False)):
        for seed in seeds:
            out[(int(N), int(seed))] = empirical_kernel(
                mdp.P, int(N), np.random.default_rng([seed, stream, n_idx]))
    return out


def plan_policies(mdp: TabularMDP, uset: UncertaintySet, P_hats: dict[tuple[int, int], np.ndarray],
                  cfg: StudyConfig, stream: int = 0, progress: bool = True) -> list[dict]:
    """Every method's policy on every ``(N, seed)``, with its discount and span estimate.

    The model-based methods plan on ``P_hat``; robust RVI Q-learning (contamination sets only;
    a single next-state sample gives no unbiased TV support function) draws its own ``S A N``
    generative samples.
    """
    rows: list[dict] = []
    S, A, _ = mdp.P.shape
    for (N, seed), P_hat in tqdm(sorted(P_hats.items()), desc=f"planning {mdp.name} {uset.label}",
                                 disable=not progress, leave=False):
        pi_rrvi, span_hat, rrvi_converged = robust_rvi_policy(P_hat, mdp.r, uset,
                                                              tol=cfg.rrvi_tol)
        H = cfg.H if cfg.H is not None else cfg.c_H * span_hat
        found: dict[str, tuple[np.ndarray, dict]] = {}
        for eps in cfg.eps:
            disc = reduction_discount(eps, H)
            pi = reduction_policy(P_hat, mdp.r, uset, disc.gamma, tol=cfg.drvi_tol)
            found[REDUCTION.format(eps=eps)] = (pi, {
                "eps": eps, "H_hat": H, "gamma_raw": disc.gamma_raw, "gamma": disc.gamma})
        for gamma in cfg.gamma_fixed:
            pi = reduction_policy(P_hat, mdp.r, uset, gamma, tol=cfg.drvi_tol)
            found[FIXED.format(gamma=gamma)] = (pi, {"gamma": gamma})
        found[ROBUST_RVI] = (pi_rrvi, {})
        pi_plug, communicating = nonrobust_plugin_policy(P_hat, mdp.r)
        found[PLUGIN] = (pi_plug, {})
        if cfg.qlearning and uset.kind == "contamination":
            q_rng = np.random.default_rng([seed, stream, N, 1])
            Q, _ = robust_rvi_q_learning(mdp.P, mdp.r, uset.radius, N, q_rng,
                                         step_power=cfg.q_step_power)
            found[QLEARNING] = (Q.argmax(axis=1), {})
        for method, (pi, info) in found.items():
            row = {"env": mdp.name, "set": uset.label, "method": method, "N": int(N),
                   "seed": int(seed), "samples_total": S * A * int(N), "eps": math.nan,
                   "gamma": math.nan, "gamma_raw": math.nan, "H_hat": math.nan,
                   "span_h_hat": span_hat, "rrvi_converged": rrvi_converged,
                   "phat_communicating": communicating,
                   "policy": [int(x) for x in pi]}
            row.update(info)
            rows.append(row)
    return rows


def evaluate_policies(mdp: TabularMDP, uset: UncertaintySet, truth: dict, rows: list[dict],
                      n_sampled_kernels: int = 20, tol: float = 1e-10, stream: int = 0,
                      progress: bool = True) -> list[dict]:
    """Add the exact robust gain on the set centred at ``P0``, the gap ``g* - g^pi``, the nominal
    gain and, at the largest ``N``, the gains under random members of the set."""
    evaluate = PolicyEvaluator(mdp, uset, tol=tol)
    largest = max(row["N"] for row in rows)
    out = []
    for row in tqdm(rows, desc=f"evaluating {mdp.name} {uset.label}", disable=not progress,
                    leave=False):
        pi = np.asarray(row["policy"], dtype=np.int64)
        g_rob, g_nom = evaluate(pi)
        new = {**row, "gap": truth["g_star"] - g_rob, "robust_gain": g_rob,
               "nominal_gain": g_nom, "sampled_gain_min": math.nan,
               "sampled_gain_mean": math.nan}
        if row["N"] == largest and n_sampled_kernels:
            rng = np.random.default_rng([row["seed"], stream, 2])
            gains = sampled_kernel_gains(mdp, uset, pi, n_sampled_kernels, rng)
            new["sampled_gain_min"] = float(gains.min())
            new["sampled_gain_mean"] = float(gains.mean())
        out.append(new)
    return out


def loglog_slope(N: np.ndarray, gap: np.ndarray, floor: float = 1e-4) -> float:
    """Least-squares slope of ``log gap`` against ``log N`` over points with ``gap > floor``
    (NaN when fewer than two such points)."""
    N, gap = np.asarray(N, float), np.asarray(gap, float)
    keep = gap > floor
    if keep.sum() < 2:
        return math.nan
    return float(np.polyfit(np.log(N[keep]), np.log(gap[keep]), 1)[0])
