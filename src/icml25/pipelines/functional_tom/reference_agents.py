"""Reference agents with known answers (``docs/papers/functional_tom.md``, "Baselines").

All implement the :class:`~.episodes.Agent` protocol; ties in argmax are broken with the
agent's seeded generator (breaking ties by action order would bias results).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from icml25.pipelines.functional_tom.games import Game, argmax_random
from icml25.pipelines.functional_tom.optimal_play import OptimalPlay, solve
from icml25.pipelines.functional_tom.partners import PartnerFSM, hypothesis_library


class _Base:
    name = "base"

    def reset(self, game: Game, horizon: int, rng: np.random.Generator,
              partner: PartnerFSM | None = None) -> None:
        self.game, self.horizon, self.rng, self.t = game, horizon, rng, 0
        self.step_info: dict = {}

    def observe(self, a: int, b: int, r: float) -> None:
        self.t += 1


class OracleDP(_Base):
    """Knows the partner FSM and plays the DP-optimal action: Delta_F = 0 exactly for
    deterministic partners (and in expectation for stochastic ones)."""

    name = "oracle"

    def reset(self, game, horizon, rng, partner=None):
        if partner is None:
            raise ValueError("OracleDP needs the partner FSM (run_episode(give_partner=True))")
        super().reset(game, horizon, rng)
        self.partner, self.opt, self.z = partner, solve(game, partner, horizon), partner.z0

    def predict(self):
        return self.partner.probs[self.z]

    def act(self):
        return argmax_random(self.opt.q[self.horizon - self.t, self.z], self.rng, tol=1e-9)

    def observe(self, a, b, r):
        self.z = self.partner.step(self.z, a, b)
        super().observe(a, b, r)


class RandomAgent(_Base):
    """Uniform play and uniform prediction; E[Delta_F]/T = V*/T - mean_a R[a, b] against a
    constant partner b (closed form, :func:`random_closed_form`)."""

    name = "random"

    def predict(self):
        return np.full(self.game.n_actions, 1.0 / self.game.n_actions)

    def act(self):
        return int(self.rng.integers(self.game.n_actions))


def random_closed_form(game: Game, opt: OptimalPlay, partner: PartnerFSM) -> float:
    """Expected regret per step of uniform play against a *constant* partner."""
    if partner.n_states != 1:
        raise ValueError("the closed form holds for single-state partners")
    p = partner.probs[0]
    return opt.v_star / opt.horizon - float(game.payoff.mean(axis=0) @ p)


class FrequencyBR(_Base):
    """Laplace-smoothed counts of the partner's actions; predicts the argmax, plays the myopic
    best response argmax_a R[a, :] @ p."""

    name = "frequency_br"

    def reset(self, game, horizon, rng, partner=None):
        super().reset(game, horizon, rng)
        self.counts = np.ones(game.n_actions)

    def _p(self):
        return self.counts / self.counts.sum()

    def predict(self):
        p = self._p()
        out = np.zeros_like(p)
        out[argmax_random(p, self.rng)] = 1.0
        return 0.98 * out + 0.02 * p  # argmax prediction, kept strictly positive for log-loss

    def act(self):
        return self.game.best_response(self._p(), self.rng)

    def observe(self, a, b, r):
        self.counts[b] += 1
        super().observe(a, b, r)


class Lag1BR(_Base):
    """Counts of the partner's action conditioned on the previous joint action (a_{t-1},
    b_{t-1}) (Laplace-smoothed), myopic best response to them: the canonical "perfect literal,
    poor functional" agent."""

    name = "lag1_br"

    def reset(self, game, horizon, rng, partner=None):
        super().reset(game, horizon, rng)
        n = game.n_actions
        self.counts = np.ones((n * n + 1, n))
        self.state = n * n

    def _p(self):
        c = self.counts[self.state]
        return c / c.sum()

    def predict(self):
        p = self._p()
        out = np.zeros_like(p)
        out[argmax_random(p, self.rng)] = 1.0
        return 0.98 * out + 0.02 * p

    def act(self):
        return self.game.best_response(self._p(), self.rng)

    def observe(self, a, b, r):
        self.counts[self.state, b] += 1
        self.state = a * self.game.n_actions + b
        super().observe(a, b, r)


class TabularRMax(_Base):
    """The paper's classical baseline "Tabular (RMax)" (Brafman & Tennenholtz 2002).

    State s = previous joint action (|A|^2 states + start). (s, a) is known when n(s, a) >= m.
    Each round: ``sweeps`` of value iteration with discount gamma; unknown (s, a) get
    Q = R_max / (1 - gamma); known ones Q = sum_b phat(b|s,a) (rbar(s,a,b) + gamma V((a, b))).
    Greedy with random tie-break. Prediction: the most frequent partner action seen in the
    current state (action 0 if none). m and gamma are our calibration (the paper does not state
    them).
    """

    name = "tabular_rmax"

    def __init__(self, m: int = 1, gamma: float = 0.95, sweeps: int = 60) -> None:
        self.m, self.gamma, self.sweeps = m, gamma, sweeps

    def reset(self, game, horizon, rng, partner=None):
        super().reset(game, horizon, rng)
        n = game.n_actions
        self.n_s = n * n + 1
        self.n_sa = np.zeros((self.n_s, n))
        self.n_sab = np.zeros((self.n_s, n, n))
        self.r_sum = np.zeros((self.n_s, n, n))
        self.b_counts = np.zeros((self.n_s, n))
        self.state = n * n

    def _q(self) -> np.ndarray:
        n, g = self.game.n_actions, self.gamma
        known = self.n_sa >= self.m
        with np.errstate(invalid="ignore", divide="ignore"):
            phat = np.where(self.n_sa[..., None] > 0, self.n_sab / self.n_sa[..., None], 0.0)
            rbar = np.where(self.n_sab > 0, self.r_sum / np.maximum(self.n_sab, 1), 0.0)
        succ = (np.arange(n)[:, None] * n + np.arange(n)[None, :])  # [a, b] -> state
        optimistic = self.game.r_max / (1 - g)
        v = np.zeros(self.n_s)
        q = np.full((self.n_s, n), optimistic)
        for _ in range(self.sweeps):
            q_known = np.einsum("sab,sab->sa", phat, rbar + g * v[succ][None])
            q = np.where(known, q_known, optimistic)
            v = q.max(axis=1)
        return q

    def predict(self):
        c = self.b_counts[self.state]
        out = np.full(self.game.n_actions, 0.02 / self.game.n_actions)
        out[int(np.argmax(c)) if c.sum() > 0 else 0] += 0.98
        return out

    def act(self):
        return argmax_random(self._q()[self.state], self.rng, tol=1e-9)

    def observe(self, a, b, r):
        s = self.state
        self.n_sa[s, a] += 1
        self.n_sab[s, a, b] += 1
        self.r_sum[s, a, b] += r
        self.b_counts[s, b] += 1
        self.state = a * self.game.n_actions + b
        super().observe(a, b, r)


class BayesPlanner(_Base):
    """Bayesian in-context planner over the library of deterministic FSM partners.

    Likelihood P(b_t | H, h_t) = 1 - eps if H predicts b_t else eps / (|A| - 1), uniform prior;
    predict = posterior mixture; act = argmax_a sum_H P(H | h) Q*_{H, k}(z_H, a) with k the rounds
    remaining (DP per hypothesis, computed once per game and horizon).
    """

    name = "bayes_planner"
    _cache: ClassVar[dict] = {}  # DP tables per (game, horizon), shared by every episode

    def __init__(self, eps: float = 0.01) -> None:
        self.eps = eps

    def reset(self, game, horizon, rng, partner=None):
        super().reset(game, horizon, rng)
        key = (game.name, game.payoff.tobytes(), game.partner_payoff.tobytes(), horizon)
        if key not in self._cache:
            library = hypothesis_library(game)
            z_max = max(h.n_states for h in library)
            n = game.n_actions
            acts = np.zeros((len(library), z_max), dtype=np.int64)
            nxt = np.zeros((len(library), z_max, n, n), dtype=np.int64)
            q = np.zeros((len(library), horizon + 1, z_max, n))
            for i, h in enumerate(library):
                acts[i, : h.n_states] = h.probs.argmax(1)
                nxt[i, : h.n_states] = h.next_state
                q[i, :, : h.n_states] = solve(game, h, horizon).q
            z0 = np.array([h.z0 for h in library])
            self._cache[key] = (acts, nxt, q, z0)
        self.acts, self.nxt, self.q, z0 = self._cache[key]
        self.z = z0.copy()
        self.log_w = np.zeros(len(z0))

    def _posterior(self):
        w = np.exp(self.log_w - self.log_w.max())
        return w / w.sum()

    def predict(self):
        w = self._posterior()
        b_pred = self.acts[np.arange(len(w)), self.z]
        n = self.game.n_actions
        p = np.full(n, 0.0)
        np.add.at(p, b_pred, w)
        return (1 - self.eps) * p + self.eps / (n - 1) * (1 - p)

    def act(self):
        w = self._posterior()
        k = self.horizon - self.t
        values = w @ self.q[np.arange(len(w)), k, self.z]  # [a]
        return argmax_random(values, self.rng, tol=1e-9)

    def observe(self, a, b, r):
        idx = np.arange(len(self.z))
        hit = self.acts[idx, self.z] == b
        n = self.game.n_actions
        self.log_w += np.where(hit, np.log(1 - self.eps), np.log(self.eps / (n - 1)))
        self.z = self.nxt[idx, self.z, a, b]
        super().observe(a, b, r)


def make_reference_agent(name: str, rmax_m: int = 1, rmax_gamma: float = 0.95,
                         rmax_sweeps: int = 60, bayes_eps: float = 0.01):
    """A fresh reference agent by name."""
    factories = {
        "oracle": OracleDP, "random": RandomAgent, "frequency_br": FrequencyBR,
        "lag1_br": Lag1BR, "bayes_planner": lambda: BayesPlanner(bayes_eps),
        "tabular_rmax": lambda: TabularRMax(rmax_m, rmax_gamma, rmax_sweeps),
    }
    if name not in factories:
        raise ValueError(f"unknown reference agent {name!r}; expected one of {sorted(factories)}")
    return factories[name]()


REFERENCE_AGENTS = ("oracle", "random", "frequency_br", "lag1_br", "bayes_planner",
                    "tabular_rmax")
