"""The episode runner and the two metrics of the benchmark, measured on the same episodes.

Round t (the paper's repeated games): the partner draws ``b_t ~ f(z_t)``; *before* it is
revealed the agent
emits a prediction ``p_t`` over partner actions (literal ToM, ``bhat_t = argmax p_t``) and an
action ``a_t``; the agent gets ``r_t = R[a_t, b_t]``, both actions are revealed, the partner moves
to ``z_{t+1} = g(z_t, a_t, b_t)``.

- literal ToM accuracy = (1/T) sum_t 1[bhat_t = b_t]; log-loss = -(1/T) sum_t log p_t(b_t);
- functional regret Delta_F = V*_T - sum_t r_t (Def. 2.2), reported per step (/T);
- rationalised ToM regret Delta_ToM = sum_t (r*_t - R[BR(bhat_t), b_t]) with BR(b) = argmax_a
  R[a, b]: the regret of a hypothetical agent that myopically best-responds to its own
  prediction at each *realised* step. Against reactive partners this is a counterfactual, not a
  rollout (a lower-bound-style diagnostic); Delta_ToM << Delta_F means "predicts well, acts badly".

Agents implement ``reset(game, horizon, rng, partner)``, ``predict() -> distribution``,
``act() -> action`` and ``observe(a, b, r)``; after ``act`` an agent may expose ``step_info``
(``invalid``, ``zero_reward``, ``invalid_prediction``, ``raw``) which the runner records.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import pandas as pd

from icml25.pipelines.functional_tom.games import Game
from icml25.pipelines.functional_tom.optimal_play import OptimalPlay
from icml25.pipelines.functional_tom.partners import PartnerFSM

LOG_COLUMNS = ("t", "a", "b", "r", "bhat", "p_b", "r_star", "r_tom", "invalid",
               "invalid_prediction", "raw")


class Agent(Protocol):
    name: str

    def reset(self, game: Game, horizon: int, rng: np.random.Generator,
              partner: PartnerFSM | None = None) -> None: ...

    def predict(self) -> np.ndarray: ...

    def act(self) -> int: ...

    def observe(self, a: int, b: int, r: float) -> None: ...


@dataclass
class EpisodeResult:
    """One episode's per-round log and its summary metrics."""

    log: pd.DataFrame
    v_star: float
    regret: float
    tom_regret: float
    accuracy: float
    log_loss: float
    invalid_rate: float


def myopic_best_response(game: Game, b: int) -> int:
    """BR(b) = argmax_a R[a, b] (first on ties: Delta_ToM is a deterministic diagnostic)."""
    return int(np.argmax(game.payoff[:, b]))


def run_episode(game: Game, partner: PartnerFSM, agent: Agent, opt: OptimalPlay, seed: int,
                invalid_policy: str = "random", give_partner: bool = False) -> EpisodeResult:
    """Play ``opt.horizon`` rounds of ``agent`` against ``partner``; seeds come from ``seed``.

    ``invalid_policy`` (a parameter) applies when the agent flags an unparseable action:
    ``random`` keeps the (already uniformly drawn) action; ``zero_reward`` gives the agent 0
    that round and advances the partner with a uniformly random agent action.
    """
    if invalid_policy not in ("random", "zero_reward"):
        raise ValueError(f"invalid_policy: got {invalid_policy!r}; expected random|zero_reward")
    horizon = opt.horizon
    partner_ss, agent_ss, invalid_ss = np.random.SeedSequence(seed).spawn(3)
    partner_rng = np.random.default_rng(partner_ss)
    invalid_rng = np.random.default_rng(invalid_ss)
    agent.reset(game, horizon, np.random.default_rng(agent_ss), partner if give_partner else None)
    z = partner.z0
    rows: dict[str, list[Any]] = {c: [] for c in LOG_COLUMNS}
    nll = 0.0
    for t in range(horizon):
        b = partner.action(z, partner_rng)
        p = np.asarray(agent.predict(), dtype=float)
        if p.shape != (game.n_actions,) or not np.all(np.isfinite(p)) or p.sum() <= 0:
            raise ValueError(f"agent {agent.name}: prediction {p} is not a distribution over "
                             f"{game.n_actions} actions")
        p = p / p.sum()
        a = int(agent.act())
        if not 0 <= a < game.n_actions:
            raise ValueError(f"agent {agent.name}: action {a} out of range")
        info = getattr(agent, "step_info", None) or {}
        invalid = bool(info.get("invalid", False))
        invalid_prediction = bool(info.get("invalid_prediction", False))
        # an unparseable prediction is never correct, and its rationalised reward is that of a
        # uniformly random best response (not action 0's, which would bias both metrics)
        bhat = -1 if invalid_prediction else int(np.argmax(p))
        r_tom = (float(game.payoff[:, b].mean()) if invalid_prediction
                 else float(game.payoff[myopic_best_response(game, bhat), b]))
        r = float(game.payoff[a, b])
        a_partner = a
        if invalid and invalid_policy == "zero_reward":
            r = 0.0
            a_partner = int(invalid_rng.integers(game.n_actions))
        agent.observe(a, b, r)
        z = partner.step(z, a_partner, b)
        nll -= float(np.log(max(p[b], 1e-12)))
        for key, value in (("t", t + 1), ("a", a), ("b", b), ("r", r), ("bhat", bhat),
                           ("p_b", float(p[b])), ("r_star", float(opt.r_star[t])),
                           ("r_tom", r_tom), ("invalid", invalid),
                           ("invalid_prediction", invalid_prediction),
                           ("raw", str(info.get("raw", "")))):
            rows[key].append(value)
    log = pd.DataFrame(rows)
    return summarise_log(log, opt.v_star, nll / horizon)


def summarise_log(log: pd.DataFrame, v_star: float, log_loss: float) -> EpisodeResult:
    """Episode metrics from a per-round log (columns of :data:`LOG_COLUMNS`)."""
    horizon = len(log)
    if horizon == 0:
        raise ValueError("episode log is empty")
    return EpisodeResult(
        log=log, v_star=v_star,
        regret=v_star - float(log["r"].sum()),
        tom_regret=float(log["r_star"].sum() - log["r_tom"].sum()),
        accuracy=float((log["bhat"] == log["b"]).mean()),
        log_loss=log_loss,
        invalid_rate=float((log["invalid"] | log["invalid_prediction"]).mean()),
    )
