"""The linear function-approximation study (docs/papers/robust_rl.md, "Data").

A Garnet-sparse model with action-block random features; three learners on the same features and
trajectories' seeds: robust linear Q-learning at the reduction's discount (the method), the
non-robust learner (``R = 0``) at the same discount, and the robust learner at a generic 0.99.
Greedy policies are evaluated exactly (robust RVI with the policy fixed) since the model is known.
"""

from __future__ import annotations

import numpy as np

from icml25.pipelines.robust_rl.environments import (
    action_block_features,
    garnet_sparse,
    require_communicating,
    state_features,
)
from icml25.pipelines.robust_rl.linear_q import TraceConfig, train_linear
from icml25.pipelines.robust_rl.reduction import reduction_discount
from icml25.pipelines.robust_rl.robust_planning import robust_relative_value_iteration, span
from icml25.pipelines.robust_rl.uncertainty import UncertaintySet

ROBUST = "robust_linear"
NONROBUST = "nonrobust_linear"
GENERIC = "robust_linear_gamma{gamma:g}"


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
                desc=f"{variant} seed {seed}")
            for entry in trace:
                rows.append({"variant": variant, "seed": seed, "gamma": gamma, "radius": radius,
                             **entry, "robust_gap": g_star - entry["robust_gain"]})
            thetas[f"{variant}/seed_{seed}"] = learner.theta.tolist()
    summary = {"env": mdp.name, "g_star": g_star, "span_h_star": span(h_star), "H": H,
               "eps": cfg.eps, "gamma_raw": disc.gamma_raw, "gamma": disc.gamma,
               "radius": cfg.radius, "thetas": thetas}
    return rows, summary
