"""The symmetric PSRO loop of Ex2PSRO and vanilla PSRO (docs/papers/ex2psro.md, "The method").

Pi <- {uniform}; U <- estimate(Pi); buffer B <- top-K of those simulations
for k = 1..iters:
    sigma <- RRD(U, lambda(k))
    pi_e <- BC(B) (Ex2PSRO and the criterion ablations) while lambda_k > 0
    pi_new <- SAC against sigma with KL weight lambda_k toward pi_e (rollouts offered to B)
    Pi <- Pi + {pi_new}; U <- extend(U, pi_new) (simulations offered to B)
final sigma_T <- RRD(U, lambda(T)).
Ex2PSRO adds no simulations: behaviour cloning only reuses already simulated trajectories.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from tqdm.auto import tqdm

from icml25.pipelines.ex2psro.bargaining import (
    MLPPolicy,
    Trajectory,
    UniformPolicy,
    play_match,
)
from icml25.pipelines.ex2psro.bargaining import play_returns as play_returns_pyspiel
from icml25.pipelines.ex2psro.meta_solver import (
    kl_weight,
    regret,
    regret_lambda,
    rrd,
    threshold_scale,
    welfare,
)
from icml25.pipelines.ex2psro.responses import (
    DiscreteSAC,
    ReplayBuffer,
    SACConfig,
    behaviour_clone,
    numpy_policy,
    policy_weights,
)
from icml25.pipelines.ex2psro.trajectory_buffer import CRITERIA, TopKTrajectories

EXPLORATION_TYPES = ("none", "ex2psro", "maxwelfare", "minwelfare", "prevbr", "uniform")


@dataclass(frozen=True)
class PSROConfig:
    iters: int
    sims_per_entry: int
    rrd_lambda_init: float
    rrd_lambda_final: float
    rrd_steps: int
    rrd_dt: float
    rrd_max_steps: int
    oracle_steps: int
    learning_starts: int
    update_every: int
    buffer_size: int
    sac: SACConfig
    explore: str
    n_top: int
    bc_lr: float
    bc_batch: int
    bc_epochs: int
    bc_min_loss: float
    lambda0: float
    k_lambda: int
    gro_weight: float = 1.0
    progress: bool = True
    #: environment episodes per oracle call; when set it replaces ``oracle_steps`` as the budget,
    #: so that every method simulates the same number of episodes
    oracle_episodes: int | None = None
    #: "payoff_range": the RRD thresholds are fractions of the game's payoff range
    #: (:func:`meta_solver.threshold_scale`); "absolute": in return units
    rrd_scale: str = "absolute"
    rrd_floor: float = 1e-3


def make_policy(weights) -> MLPPolicy | UniformPolicy:
    return UniformPolicy() if weights is None else MLPPolicy(weights)


def estimate_entry(game, a, b, sims: int, rng: np.random.Generator,
                   offer=None) -> tuple[float, float]:
    """Mean returns (of a, of b) over ``sims`` episodes with seats drawn 50/50 per episode.

    Both numbers come from the same simulations; they fill U[i, j] and U[j, i]."""
    ra, rb = np.zeros(sims), np.zeros(sims)
    for e in range(sims):
        traj, seat = play_match(game, a, b, rng)
        ra[e], rb[e] = traj.returns[seat], traj.returns[1 - seat]
        if offer is not None:
            offer(traj)
    return float(ra.mean()), float(rb.mean())


def extend_payoffs(game, payoffs: np.ndarray, policies: list, sims: int,
                   rng: np.random.Generator, offer=None) -> np.ndarray:
    """Add the last policy's row and column to the empirical payoff matrix by simulation."""
    n = len(policies)
    out = np.zeros((n, n))
    out[: n - 1, : n - 1] = payoffs
    new = policies[-1]
    for j in range(n):
        u_new, u_j = estimate_entry(game, new, policies[j], sims, rng, offer)
        if j == n - 1:
            out[j, j] = 0.5 * (u_new + u_j)  # both seats are the same policy
        else:
            out[n - 1, j], out[j, n - 1] = u_new, u_j
    return out


def _learner_transitions(traj: Trajectory, seat: int, gro_weight: float):
    """(obs, legal, action, reward, next_obs, next_legal, done) of the learner's decisions.

    Reward of a decision: the rewards attributed to it (bargaining: the returns, at each player's
    last decision; Harvest: the step's rewards), mixed by the generalized response weight w:
    w r_i + (1 - w) r_j."""
    steps = [t for t, p in enumerate(traj.players) if p == seat]
    out = []
    for i, t in enumerate(steps):
        last = i == len(steps) - 1
        nxt = steps[i + 1] if not last else t
        r = traj.rewards[t]
        reward = gro_weight * r[seat] + (1.0 - gro_weight) * r[1 - seat]
        out.append((traj.obs[t], traj.legal[t], traj.actions[t], reward,
                    traj.obs[nxt], traj.legal[nxt] if not last else np.ones_like(traj.legal[t]),
                    float(last)))
    return out


def train_response(game, population: list, sigma: np.ndarray, cfg: PSROConfig, seed: int,
                   exploration=None, kl: float = 0.0, offer=None,
                   desc: str = "response") -> tuple[list, dict[str, Any]]:
    """Train a (regularised) discrete-SAC response against opponents drawn from ``sigma``."""
    rng = np.random.default_rng(seed)
    n_obs = game.information_state_tensor_shape()[0]
    n_actions = game.num_distinct_actions()
    learner = DiscreteSAC(n_obs, n_actions, cfg.sac, seed, exploration, kl)
    acting = numpy_policy(learner.policy)
    replay = ReplayBuffer(cfg.buffer_size, n_obs, n_actions)
    steps, episodes, stats, returns = 0, 0, [], []
    by_episodes = cfg.oracle_episodes is not None
    budget = cfg.oracle_episodes if by_episodes else cfg.oracle_steps
    bar = tqdm(total=budget, desc=desc, disable=not cfg.progress, leave=False)
    while (episodes if by_episodes else steps) < budget:
        opponent = population[int(rng.choice(len(population), p=sigma))]
        traj, seat = play_match(game, acting, opponent, rng)
        episodes += 1
        returns.append(traj.returns[seat])
        if offer is not None:
            offer(traj)
        if by_episodes:
            bar.update(1)
        for tr in _learner_transitions(traj, seat, cfg.gro_weight):
            replay.add(*tr)
            steps += 1
            if not by_episodes:
                bar.update(1)
            if replay.size >= cfg.learning_starts and steps % cfg.update_every == 0:
                stats.append(learner.update(replay.sample(cfg.sac.batch, rng)))
    bar.close()
    last = stats[-50:]
    summary = {"episodes": episodes, "learner_steps": steps, "updates": len(stats),
               "mean_return_last_100": float(np.mean(returns[-100:])),
               "kl_end": float(np.mean([s["kl"] for s in last])) if last else float("nan"),
               "q_loss_end": float(np.mean([s["q_loss"] for s in last])) if last else float("nan")}
    return policy_weights(learner.policy), summary


def _bc_data(trajectories: list[Trajectory]) -> tuple[np.ndarray, np.ndarray]:
    obs = [o for t in trajectories for o in t.obs]  # both players' decisions, pooled
    acts = [a for t in trajectories for a in t.actions]
    return np.asarray(obs, np.float32), np.asarray(acts, np.int64)


def run_psro(game, cfg: PSROConfig, seed: int, name: str = "psro") -> dict[str, Any]:
    """One PSRO run; returns the per-iteration record and the population's weights."""
    if cfg.explore not in EXPLORATION_TYPES:
        raise ValueError(f"unknown exploration type {cfg.explore!r}; known: {EXPLORATION_TYPES}")
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    criterion = cfg.explore if cfg.explore in CRITERIA else "ex2psro"
    buffer = TopKTrajectories(max(cfg.n_top // 2, 1), criterion)

    simulated = [0]  # every environment episode of the run (estimation and oracle training)

    def offer(traj: Trajectory) -> None:
        simulated[0] += 1
        buffer.offer(traj.returns, traj)

    def threshold(k: int, payoffs: np.ndarray) -> float:
        scale = threshold_scale(game, payoffs, cfg.rrd_scale)
        return scale * regret_lambda(k, cfg.rrd_lambda_init, cfg.rrd_lambda_final, cfg.rrd_steps,
                                     cfg.rrd_floor)

    weights: list = [None]
    policies = [make_policy(None)]
    u_a, u_b = estimate_entry(game, policies[0], policies[0], cfg.sims_per_entry, rng, offer)
    payoffs = np.array([[0.5 * (u_a + u_b)]])
    record: dict[str, list] = {k: [] for k in (
        "sigma", "rrd_lambda", "rrd_steps_used", "own_regret", "kl_weight", "welfare",
        "bc_loss", "oracle")}

    def solve(k: int) -> np.ndarray:
        lam = threshold(k, payoffs)
        sigma, used = rrd(payoffs, lam, cfg.rrd_dt, cfg.rrd_max_steps)
        record["sigma"].append(sigma)
        record["rrd_lambda"].append(lam)
        record["rrd_steps_used"].append(used)
        record["own_regret"].append(regret(payoffs, sigma))
        record["welfare"].append(welfare(payoffs, sigma))
        return sigma

    for k in tqdm(range(cfg.iters), desc=f"{name} seed {seed}", disable=not cfg.progress):
        sigma = solve(k)
        weight = kl_weight(len(policies), cfg.lambda0, cfg.k_lambda)
        exploration, bc_loss = None, float("nan")
        if cfg.explore != "none" and weight > 0:
            if cfg.explore in CRITERIA:
                obs, acts = _bc_data(buffer.items())
                exploration, losses = behaviour_clone(
                    obs, acts, cfg.sac.hidden, game.num_distinct_actions(), cfg.bc_lr,
                    cfg.bc_batch, cfg.bc_epochs, cfg.bc_min_loss, seed * 1000 + k)
                bc_loss = losses[-1]
            elif cfg.explore == "prevbr" and weights[-1] is not None:
                exploration = _torch_from_weights(weights[-1])
            elif cfg.explore == "uniform" or cfg.explore == "prevbr":
                exploration = _uniform_net(game, cfg.sac.hidden)
        record["kl_weight"].append(weight if exploration is not None else 0.0)
        record["bc_loss"].append(bc_loss)
        new, summary = train_response(game, policies, sigma, cfg, seed * 1000 + k + 1,
                                      exploration, weight, offer, desc=f"{name} oracle {k + 1}")
        record["oracle"].append(summary)
        weights.append(new)
        policies.append(make_policy(new))
        payoffs = extend_payoffs(game, payoffs, policies, cfg.sims_per_entry, rng, offer)
    solve(cfg.iters)
    oracle_episodes = int(sum(o["episodes"] for o in record["oracle"]))
    episodes = {"episodes_total": simulated[0], "episodes_oracle": oracle_episodes,
                "episodes_estimation": simulated[0] - oracle_episodes,
                "learner_steps": int(sum(o["learner_steps"] for o in record["oracle"]))}
    return {"name": name, "seed": seed, "payoffs": payoffs, "weights": weights, **record,
            **episodes}


def _torch_from_weights(weights) -> torch.nn.Sequential:
    from icml25.pipelines.ex2psro.responses import mlp

    net = mlp(weights[0][0].shape[0], weights[-1][0].shape[1],
              tuple(w.shape[1] for w, _ in weights[:-1]))
    linears = [m for m in net if isinstance(m, torch.nn.Linear)]
    with torch.no_grad():
        for m, (w, b) in zip(linears, weights, strict=True):
            m.weight.copy_(torch.from_numpy(w.T.copy()))
            m.bias.copy_(torch.from_numpy(b))
    return net


def _uniform_net(game, hidden) -> torch.nn.Sequential:
    """A network whose masked softmax is exactly uniform over legal actions (all-zero output)."""
    from icml25.pipelines.ex2psro.responses import mlp

    net = mlp(game.information_state_tensor_shape()[0], game.num_distinct_actions(), hidden)
    with torch.no_grad():
        for p in net.parameters():
            p.zero_()
    return net


def play_returns(game, a, b, sims: int, rng: np.random.Generator) -> np.ndarray:
    """Returns (sims x 2: a's, b's) of ``sims`` episodes of ``a`` against ``b``, a's seat drawn
    50/50 per episode. Bargaining and the stag hunt play the episodes in lockstep, one batched
    forward pass per policy and step (:func:`bargaining.play_returns`,
    :meth:`StagHuntGame.play_returns`); a game without a batched player (Harvest) plays them one
    by one."""
    seats = rng.integers(2, size=sims)
    if hasattr(game, "play_returns"):
        return game.play_returns(a, b, seats, rng)
    if not hasattr(game, "play_episode"):  # a pyspiel game
        return play_returns_pyspiel(game, a, b, seats, rng)
    out = np.empty((sims, 2))
    for e, seat in enumerate(seats):
        traj = game.play_episode((a, b) if seat == 0 else (b, a), rng)
        out[e] = traj.returns[seat], traj.returns[1 - seat]
    return out


def evaluate_entry(game, a, b, sims: int, rng: np.random.Generator) -> tuple[float, float]:
    """Mean returns (of a, of b) over ``sims`` episodes (:func:`play_returns`): the estimate of
    :func:`estimate_entry` without trajectories, for the evaluation."""
    returns = play_returns(game, a, b, sims, rng)
    return float(returns[:, 0].mean()), float(returns[:, 1].mean())


def pair_rng(seed: int, i: int, j: int) -> np.random.Generator:
    """The random stream of the evaluation's pair (i, j), its own for every pair, so an entry
    does not depend on which process evaluates it or in which order."""
    return np.random.default_rng([seed, i, j])


_EVAL: dict[str, Any] = {}  # a worker process's game and policies (set once per process)


def _set_eval_worker(make_game, policies: list) -> None:
    _EVAL["game"], _EVAL["policies"] = make_game(), policies


def _evaluate_pairs(pairs: list[tuple[int, int]], sims: int, seed: int
                    ) -> list[tuple[float, float]]:
    from threadpoolctl import threadpool_limits

    game, policies = _EVAL["game"], _EVAL["policies"]
    # the lockstep products are small (sims x 309 by 309 x 50): one BLAS thread is fastest,
    # several on a busy machine many times slower; worker processes give the parallelism
    with threadpool_limits(1, user_api="blas"):
        return [evaluate_entry(game, policies[i], policies[j], sims, pair_rng(seed, i, j))
                for i, j in pairs]


def cross_evaluate(make_game, policies: list, sims: int, seed: int, progress: bool = True,
                   workers: int = 1) -> np.ndarray:
    """The combined empirical game: U[i, j] over every pair of ``policies`` by simulation.

    ``make_game()`` builds the game (in each worker process too); pair (i, j) draws from its own
    stream :func:`pair_rng`, so the matrix is the same for any number of ``workers`` (processes;
    1: this one)."""
    from icml25.core.workers import chunks, process_map

    n = len(policies)
    payoffs = np.zeros((n, n))
    pairs = [(i, j) for i in range(n) for j in range(i, n)]
    parts = chunks(pairs, workers, per_worker=16 if workers > 1 else 64)
    jobs = [(part, sims, seed) for part in parts]
    if workers > 1:
        results = process_map(_evaluate_pairs, jobs, workers, initializer=_set_eval_worker,
                              initargs=(make_game, policies))
    else:
        _set_eval_worker(make_game, policies)
        results = (_evaluate_pairs(*job) for job in jobs)
    bar = tqdm(total=len(pairs), desc="cross-evaluation", disable=not progress)
    for part, values in zip(parts, results, strict=True):
        for (i, j), (a, b) in zip(part, values, strict=True):
            if i == j:
                payoffs[i, i] = 0.5 * (a + b)
            else:
                payoffs[i, j], payoffs[j, i] = a, b
        bar.update(len(part))
    bar.close()
    _EVAL.clear()
    return payoffs
