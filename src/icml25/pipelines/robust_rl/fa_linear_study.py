"""The linear function-approximation study (docs/papers/robust_rl.md, "Data").

A Garnet-sparse model with action-block random features; three learners on the same features and
trajectories' seeds: robust linear Q-learning at the reduction's discount (the method), the
non-robust learner (``R = 0``) at the same discount, and the robust learner at a generic 0.99.
Greedy policies are evaluated exactly (robust RVI with the policy fixed) since the model is known.

Convergence is judged where the answer is known (``fa_linear.onehot``): with one-hot features
the learner is tabular robust Q-learning, whose limit is the robust ``Q*`` of the contamination
set at the same discount (:func:`robust_q_star`). The check runs the method's step schedule
(``robust_linear_onehot``) and the shared decaying step ``alpha_0 / (1 + k / k_0)``
(``robust_linear_onehot_global``, the schedule that starves rarely visited pairs) on the same
trajectories' seeds and records ``||Q - Q*||_inf`` (absolute and relative to ``||Q*||_inf``).
"""

from __future__ import annotations

import numpy as np

from icml25.pipelines.robust_rl.environments import (
    action_block_features,
    garnet_sparse,
    require_communicating,
    state_features,
)
from icml25.pipelines.robust_rl.linear_q import TraceConfig, robust_q_star, train_linear
from icml25.pipelines.robust_rl.reduction import reduction_discount
from icml25.pipelines.robust_rl.robust_planning import robust_relative_value_iteration, span
from icml25.pipelines.robust_rl.uncertainty import UncertaintySet

ROBUST = "robust_linear"
NONROBUST = "nonrobust_linear"
GENERIC = "robust_linear_gamma{gamma:g}"
ONEHOT = "robust_linear_onehot"
ONEHOT_GLOBAL = "robust_linear_onehot_global"


def run_fa_linear(cfg, progress: bool = True) -> tuple[list[dict], dict]:
    """Train every learner on every seed; returns (trace rows, summary with g*, H, discounts and
    the final parameters). ``cfg`` is the validated ``fa_linear`` parameter block."""
    mdp = garnet_sparse(cfg.n_states, cfg.n_actions, cfg.branching, cfg.instance_seed,
                        n_goals=cfg.n_goals)
    require_communicating(mdp.P, mdp.name)
    uset = UncertaintySet("contamination", cfg.radius)
    g_star, h_star, _ = robust_relative_value_iteration(mdp.P, mdp.r, uset)
    H = cfg.c_H * span(h_star) if cfg.H == "auto" else float(cfg.H)
    disc = reduction_discount(cfg.eps, H)
    features = action_block_features(
        state_features(cfg.n_states, cfg.feature_dim, np.random.default_rng(cfg.instance_seed)),
        cfg.n_actions)
    learners = {ROBUST: (disc.gamma, cfg.radius), NONROBUST: (disc.gamma, 0.0),
                GENERIC.format(gamma=cfg.gamma_generic): (cfg.gamma_generic, cfg.radius)}
    rows, thetas = [], {}
    trace_cfg = TraceConfig(steps=cfg.steps, explore=cfg.explore, eval_every=cfg.eval_every)
    for variant, (gamma, radius) in learners.items():
        for seed in cfg.seeds:
            learner, trace = train_linear(
                mdp, features, gamma, radius, trace_cfg, np.random.default_rng([seed, 7]), uset,
                alpha0=cfg.alpha0, k0=cfg.k0, reservoir_size=cfg.reservoir, progress=progress,
                desc=f"{variant} seed {seed}", schedule=cfg.schedule)
            for entry in trace:
                rows.append({"study": "features", "variant": variant, "seed": seed,
                             "gamma": gamma, "radius": radius, **entry,
                             "robust_gap": g_star - entry["robust_gain"]})
            thetas[f"{variant}/seed_{seed}"] = learner.theta.tolist()
    summary = {"env": mdp.name, "g_star": g_star, "span_h_star": span(h_star), "H": H,
               "eps": cfg.eps, "gamma_raw": disc.gamma_raw, "gamma": disc.gamma,
               "gamma_clamped": disc.clamped, "radius": cfg.radius, "schedule": cfg.schedule,
               "thetas": thetas}
    if cfg.onehot.enabled:
        onehot_rows, summary["onehot"] = run_onehot_check(cfg, progress)
        rows += onehot_rows
    return rows, summary


def run_onehot_check(cfg, progress: bool = True) -> tuple[list[dict], dict]:
    """The one-hot convergence check (module docstring): trace rows with ``q_error`` and
    ``q_rel_error`` per evaluation, and a summary with the model's ``g*``, span, ``H``, the raw
    and planning discounts and ``||Q*||_inf``."""
    oh = cfg.onehot
    mdp = garnet_sparse(oh.n_states, oh.n_actions, oh.branching, oh.instance_seed,
                        n_goals=oh.n_goals)
    require_communicating(mdp.P, mdp.name)
    uset = UncertaintySet("contamination", cfg.radius)
    g_star, h_star, _ = robust_relative_value_iteration(mdp.P, mdp.r, uset)
    H = cfg.c_H * span(h_star) if cfg.H == "auto" else float(cfg.H)
    disc = reduction_discount(cfg.eps, H)
    q_star = robust_q_star(mdp, disc.gamma, cfg.radius)
    S, A = mdp.r.shape
    features = np.eye(S * A).reshape(S, A, S * A)
    trace_cfg = TraceConfig(steps=oh.steps, explore=cfg.explore, eval_every=oh.eval_every)
    schedules = {ONEHOT: (cfg.schedule, cfg.alpha0 if oh.alpha0 is None else oh.alpha0,
                          cfg.k0 if oh.k0 is None else oh.k0),
                 ONEHOT_GLOBAL: ("global", cfg.global_alpha0, cfg.global_k0)}
    rows = []
    for variant, (schedule, alpha0, k0) in schedules.items():
        for seed in cfg.seeds:
            _, trace = train_linear(
                mdp, features, disc.gamma, cfg.radius, trace_cfg,
                np.random.default_rng([seed, 11]), uset, alpha0=alpha0, k0=k0,
                reservoir_size=0, progress=progress, desc=f"{variant} seed {seed}",
                schedule=schedule, q_reference=q_star)
            rows += [{"study": "onehot", "variant": variant, "seed": seed, "gamma": disc.gamma,
                      "radius": cfg.radius, **entry, "robust_gap": g_star - entry["robust_gain"]}
                     for entry in trace]
    summary = {"env": mdp.name, "g_star": g_star, "span_h_star": span(h_star), "H": H,
               "gamma_raw": disc.gamma_raw, "gamma": disc.gamma, "gamma_clamped": disc.clamped,
               "q_star_sup": float(np.abs(q_star).max()),
               "schedules": {v: {"schedule": sc, "alpha0": a, "k0": k}
                             for v, (sc, a, k) in schedules.items()}}
    return rows, summary
