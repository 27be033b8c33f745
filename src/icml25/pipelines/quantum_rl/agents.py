"""Q-UCRL, UCRL2 and the bracketing agents on a tabular average-reward MDP.

Q-UCRL (Ganguly, Xu, Aggarwal, ICML 2025; docs/papers/quantum_rl.md, "The method") is UCRL2's
epoch loop (Jaksch, Ortner, Auer 2010, Fig. 1) with three changes:

* every step also makes one single-use call of the quantum transition oracle of the visited
  ``(s, a)``; at the end of an epoch, the ``nu_e(s, a)`` calls of *that epoch* feed one quantum
  estimate ``P~_e(.|s, a)`` (median-of-K amplitude estimation per next state, simulated exactly in
  :mod:`.amplitude_estimation`); with fewer than ``2 K kappa`` calls it falls back to the epoch's
  empirical frequency;
* estimates are combined by the momentum update
  ``P_hat <- (N P_hat + nu P~) / (N + nu)``, ``N <- N + nu``;
* confidence radii shrink like ``1/n``: ``beta_Q = c S L / max(1, N)`` with
  ``L = log(2 S A t_e / delta)``. Updates that fell back to empirical frequencies carry a
  Hoeffding radius ``sqrt(S L / nu_k)``; their share of the momentum average's l1 error bound
  (``sum_k nu_k err_k / N``) is ``H = c sqrt(S L) sum_k sqrt(nu_k) / max(1, N)``.
  ``fallback_radius: max`` uses ``max(beta_Q, H)`` (the paper's ``beta_Q`` whenever ``H`` is
  smaller, which is the usual case since fallbacks only happen while ``N < ~4K``); ``sum`` uses
  ``beta_Q + H`` (the strict bound), ``none`` the bare ``beta_Q`` (both ablations). EVI stops at
  ``span < 1/t_e``.

UCRL2 is the same loop with empirical frequencies (for which the momentum update *is* the pooled
mean), ``beta_C = c sqrt(S L / max(1, N))`` and EVI tolerance ``1/sqrt(t_e)``. The doubling trigger
ends an epoch when the action about to be played has ``nu(s, a) >= max(1, N(s, a))``.

Rewards: known by default (``reward_known=True``, this project's reading of the paper). With
``reward_known=False`` the agent observes Bernoulli(r(s, a)) rewards and estimates ``r`` with the same
machinery (one quantum AE estimate of the Bernoulli mean per epoch, or the empirical mean; momentum
update; radius ``c L / N`` or ``c sqrt(L / N)``) and plans with ``min(1, r_hat + beta_r)``.

Regret is the pseudo-regret ``R(t) = sum_{tau <= t} (rho* - r(s_tau, a_tau))``; the realised
``t rho* - sum r_tau`` is recorded beside it (identical when rewards are known).
"""

from __future__ import annotations

import math
import time
from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from icml25.core.mdp import TabularMDP
from icml25.pipelines.quantum_rl.amplitude_estimation import (
    auto_k,
    grover_power,
    median_of_k_estimate,
    quantum_row_estimate,
    union_bound_delta,
)
from icml25.pipelines.quantum_rl.extended_value_iteration import extended_value_iteration

_CHUNK = 1 << 16


class AgentInputError(ValueError):
    """An MDP, horizon or confidence level the agents refuse."""


@dataclass(frozen=True)
class AgentConfig:
    """One agent. ``kind``: ``optimistic`` (Q-UCRL / UCRL2 family), ``oracle`` or ``random``."""

    kind: Literal["optimistic", "oracle", "random"] = "optimistic"
    estimator: Literal["quantum", "classical"] = "quantum"
    radius: Literal["quantum", "classical"] = "quantum"
    c: float = 1.0
    eps_rule: Literal["inv", "inv_sqrt"] = "inv"
    delta: float = 0.05
    K: int | Literal["auto"] = 7
    kappa: int = 1
    budget_mode: Literal["paper", "split"] = "paper"
    fallback_radius: Literal["max", "sum", "none"] = "max"
    aperiodic: float = 0.5
    evi_max_sweeps: int = 200_000
    reward_known: bool = True


@dataclass
class RunResult:
    """Regret at the checkpoints, the per-epoch log and the final estimates of one run."""

    checkpoints: np.ndarray
    regret: np.ndarray
    epochs: list[dict] = field(default_factory=list)
    P_hat: np.ndarray | None = None
    N: np.ndarray | None = None
    wall_seconds: float = 0.0
    evi_seconds: float = 0.0
    evi_calls: int = 0
    K: int | None = None
    counts: np.ndarray | None = None
    realised_regret: np.ndarray | None = None
    r_hat: np.ndarray | None = None


def momentum_update(P_hat: np.ndarray, N: float, fresh: np.ndarray, nu: int) -> np.ndarray:
    """``(N P_hat + nu P~) / (N + nu)``: combine the running estimate with an epoch's fresh one.

    With empirical frequencies as ``P~`` this is exactly the pooled empirical mean of all data.
    """
    return (N * P_hat + nu * fresh) / (N + nu)


def check_inputs(mdp: TabularMDP, horizon: int, delta: float) -> None:
    """Refuse rewards outside [0, 1], a horizon ``T < 1`` and ``delta`` outside (0, 1).

    (The kernel itself is validated by :class:`icml25.core.mdp.TabularMDP`.)
    """
    if np.any(mdp.r < 0.0) or np.any(mdp.r > 1.0):
        s, a = np.argwhere((mdp.r < 0.0) | (mdp.r > 1.0))[0]
        raise AgentInputError(f"{mdp.name}.r[{s}, {a}] = {mdp.r[s, a]:.4g}; rewards must lie in "
                              "[0, 1] (a negative reward is refused)")
    if isinstance(horizon, bool) or int(horizon) != horizon or horizon < 1:
        raise AgentInputError(f"horizon T = {horizon!r}; expected an integer T >= 1")
    if not 0.0 < delta < 1.0:
        raise AgentInputError(f"delta = {delta!r}; expected a confidence level in (0, 1)")


def log_checkpoints(horizon: int, n_points: int) -> np.ndarray:
    """Distinct, log-spaced step counts in ``[1, T]``, always ending at ``T``."""
    pts = np.unique(np.round(np.logspace(0, math.log10(horizon), n_points)).astype(np.int64))
    return np.unique(np.append(pts[(pts >= 1) & (pts <= horizon)], horizon))


def _regret_at(rewards: np.ndarray, rho_star: float, checkpoints: np.ndarray) -> np.ndarray:
    regret = np.cumsum(rho_star - rewards)
    return regret[checkpoints - 1]


def _uniforms(rng: np.random.Generator, horizon: int):
    """Uniform draws in chunks (bounded memory for T = 1e7)."""
    done = 0
    while done < horizon:
        n = min(_CHUNK, horizon - done)
        yield from rng.random(n).tolist()
        done += n


def run_fixed_policy(mdp: TabularMDP, rho_star: float, horizon: int, policy: np.ndarray | None,
                     rng: np.random.Generator, checkpoints: np.ndarray,
                     start_state: int = 0, reward_known: bool = True) -> RunResult:
    """The bracketing agents: a fixed deterministic ``policy`` (oracle) or uniform actions (None).

    With ``reward_known=False`` the realised regret uses Bernoulli(r(s, a)) rewards."""
    check_inputs(mdp, horizon, 0.5)
    start = time.perf_counter()
    S, A = mdp.n_states, mdp.n_actions
    cdf = [list(np.cumsum(mdp.P[s, a])) for s in range(S) for a in range(A)]
    actions = (rng.integers(0, A, size=horizon).tolist() if policy is None
               else None)
    pi = None if policy is None else [int(x) for x in policy]
    kseq = np.empty(horizon, dtype=np.int64)
    s = start_state
    for t, u in enumerate(_uniforms(rng, horizon)):
        a = actions[t] if pi is None else pi[s]
        k = s * A + a
        kseq[t] = k
        s = min(bisect_right(cdf[k], u), S - 1)
    mean_rewards = mdp.r.reshape(-1)[kseq]
    rewards = (mean_rewards if reward_known
               else (rng.random(horizon) < mean_rewards).astype(float))
    return RunResult(checkpoints, _regret_at(mean_rewards, rho_star, checkpoints),
                     wall_seconds=time.perf_counter() - start,
                     realised_regret=_regret_at(rewards, rho_star, checkpoints))


def radii(cfg: AgentConfig, N: np.ndarray, fallback_sqrt: np.ndarray, t_e: int, S: int,
          A: int) -> np.ndarray:
    """Confidence radii ``beta(s, a)`` at the start of an epoch (module docstring)."""
    L = math.log(2.0 * S * A * t_e / cfg.delta)
    n = np.maximum(1.0, N)
    if cfg.radius == "classical":
        return cfg.c * np.sqrt(S * L / n)
    quantum = S * L / n
    hoeffding = math.sqrt(S * L) * fallback_sqrt / n
    if cfg.fallback_radius == "none":
        return cfg.c * quantum
    if cfg.fallback_radius == "sum":
        return cfg.c * (quantum + hoeffding)
    return cfg.c * np.maximum(quantum, hoeffding)


def reward_radii(cfg: AgentConfig, N: np.ndarray, fallback_sqrt: np.ndarray, t_e: int, S: int,
                 A: int) -> np.ndarray:
    """Radii of the reward estimates (unknown rewards): the one-coordinate analogues of
    :func:`radii`, ``c L / N`` (quantum) or ``c sqrt(L / N)`` (classical)."""
    L = math.log(2.0 * S * A * t_e / cfg.delta)
    n = np.maximum(1.0, N)
    if cfg.radius == "classical":
        return cfg.c * np.sqrt(L / n)
    quantum = L / n
    hoeffding = math.sqrt(L) * fallback_sqrt / n
    if cfg.fallback_radius == "none":
        return cfg.c * quantum
    if cfg.fallback_radius == "sum":
        return cfg.c * (quantum + hoeffding)
    return cfg.c * np.maximum(quantum, hoeffding)


def run_optimistic(mdp: TabularMDP, rho_star: float, horizon: int, cfg: AgentConfig,
                   rng: np.random.Generator, checkpoints: np.ndarray,
                   start_state: int = 0) -> RunResult:
    """Q-UCRL (``estimator=quantum, radius=quantum, eps_rule=inv``), UCRL2
    (``classical, classical, inv_sqrt``) or an ablation mixing the two; see the module docstring.

    Each epoch logs: start ``t_e``, length, EVI sweeps/seconds/convergence, optimistic gain,
    the number of visited ``(s, a)`` (``N > 0``) and how many of them have the true row inside
    their l1 ball (coverage), the mean radius over visited pairs and the quantum/fallback updates.
    """
    check_inputs(mdp, horizon, cfg.delta)
    start = time.perf_counter()
    S, A = mdp.n_states, mdp.n_actions
    P, r = mdp.P, mdp.r
    K = (auto_k(union_bound_delta(cfg.delta, S, A, horizon)) if cfg.K == "auto" else int(cfg.K))
    env_rng, oracle_rng, reward_rng = rng.spawn(3)
    cdf = [list(np.cumsum(P[s, a])) for s in range(S) for a in range(A)]
    uniforms = _uniforms(env_rng, horizon)
    sample_rewards = not cfg.reward_known
    reward_uniforms = _uniforms(reward_rng, horizon) if sample_rewards else None
    r_flat = r.reshape(-1).tolist()
    r_hat = np.zeros((S, A))
    reward_fallback_sqrt = np.zeros((S, A))
    rewards = np.empty(horizon) if sample_rewards else None

    P_hat = np.full((S, A, S), 1.0 / S)
    N = np.zeros((S, A))
    fallback_sqrt = np.zeros((S, A))
    total_counts = np.zeros((S, A, S))
    kseq = np.empty(horizon, dtype=np.int64)
    epochs: list[dict] = []
    evi_seconds = 0.0
    t, s = 0, start_state
    while t < horizon:
        t_e = t + 1
        beta = radii(cfg, N, fallback_sqrt, t_e, S, A)
        eps = 1.0 / t_e if cfg.eps_rule == "inv" else 1.0 / math.sqrt(t_e)
        r_plan = r
        if sample_rewards:
            r_plan = np.minimum(1.0, r_hat + reward_radii(cfg, N, reward_fallback_sqrt, t_e, S, A))
        tic = time.perf_counter()
        plan = extended_value_iteration(P_hat, r_plan, beta, eps, cfg.aperiodic,
                                        cfg.evi_max_sweeps)
        evi_time = time.perf_counter() - tic
        evi_seconds += evi_time
        visited = N > 0
        covered = (np.abs(P - P_hat).sum(axis=2) <= beta) & visited

        pi = plan.policy.tolist()
        threshold = np.maximum(1, N).reshape(-1).tolist()
        nu = [0] * (S * A)
        counts = [0] * (S * A * S)
        reward_sums = [0.0] * (S * A)
        while t < horizon:
            k = s * A + pi[s]
            if nu[k] >= threshold[k]:
                break
            s = min(bisect_right(cdf[k], next(uniforms)), S - 1)
            counts[k * S + s] += 1
            nu[k] += 1
            kseq[t] = k
            if sample_rewards:
                x = 1.0 if next(reward_uniforms) < r_flat[k] else 0.0
                reward_sums[k] += x
                rewards[t] = x
            t += 1

        nu_arr = np.asarray(nu, dtype=float).reshape(S, A)
        counts_arr = np.asarray(counts, dtype=float).reshape(S, A, S)
        n_quantum = n_fallback = 0
        for k in np.flatnonzero(nu_arr.reshape(-1)):
            sa = divmod(int(k), A)
            n_new = int(nu_arr[sa])
            fresh = counts_arr[sa] / n_new
            if cfg.estimator == "quantum":
                est, _ = quantum_row_estimate(P[sa], n_new, K, cfg.kappa, cfg.budget_mode,
                                              oracle_rng)
                if est is None:
                    fallback_sqrt[sa] += math.sqrt(n_new)
                    n_fallback += 1
                else:
                    fresh = est
                    n_quantum += 1
            P_hat[sa] = momentum_update(P_hat[sa], N[sa], fresh, n_new)
            if sample_rewards:
                fresh_r = reward_sums[int(k)] / n_new
                M = grover_power(n_new, K, cfg.kappa) if cfg.estimator == "quantum" else 0
                if M >= 2:
                    fresh_r = float(median_of_k_estimate(np.array([r[sa]]), M, K, oracle_rng)[0])
                elif cfg.estimator == "quantum":
                    reward_fallback_sqrt[sa] += math.sqrt(n_new)
                r_hat[sa] = momentum_update(r_hat[sa], N[sa], fresh_r, n_new)
            N[sa] += n_new
        total_counts += counts_arr
        epochs.append({
            "epoch": len(epochs) + 1, "t_start": t_e, "length": int(nu_arr.sum()),
            "evi_sweeps": plan.sweeps, "evi_seconds": evi_time, "evi_converged": plan.converged,
            "optimistic_gain": plan.gain, "visited_pairs": int(visited.sum()),
            "covered_pairs": int(covered.sum()),
            "mean_radius": float(beta[visited].mean()) if visited.any() else math.nan,
            "quantum_updates": n_quantum, "fallback_updates": n_fallback,
        })
    mean_rewards = r.reshape(-1)[kseq]
    return RunResult(checkpoints, _regret_at(mean_rewards, rho_star, checkpoints), epochs, P_hat,
                     N, time.perf_counter() - start, evi_seconds, len(epochs),
                     K if cfg.estimator == "quantum" else None, total_counts,
                     _regret_at(rewards if sample_rewards else mean_rewards, rho_star,
                                checkpoints),
                     r_hat if sample_rewards else None)


def run_agent(mdp: TabularMDP, rho_star: float, pi_star: np.ndarray, horizon: int,
              cfg: AgentConfig, rng: np.random.Generator, checkpoints: np.ndarray) -> RunResult:
    """Dispatch on ``cfg.kind``."""
    if cfg.kind == "oracle":
        return run_fixed_policy(mdp, rho_star, horizon, pi_star, rng, checkpoints,
                                reward_known=cfg.reward_known)
    if cfg.kind == "random":
        return run_fixed_policy(mdp, rho_star, horizon, None, rng, checkpoints,
                                reward_known=cfg.reward_known)
    return run_optimistic(mdp, rho_star, horizon, cfg, rng, checkpoints)
