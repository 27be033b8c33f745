"""Response oracles of Ex2PSRO in torch: behaviour cloning and discrete SAC with a KL term.

docs/papers/ex2psro.md, "The method":
- exploration policy (``imitation_deep.py`` of the authors' OpenSpiel fork): a fresh 2x50 ReLU
  MLP behaviour-cloned with cross-entropy (Adam) on every (observation, action) of both players
  of the selected trajectories, early stop once the mean epoch loss < ``min_loss``;
- regularised response (``imitation_fine_tune.py``): discrete SAC with twin critics, Polyak
  targets, critic target y = r + gamma (1 - done) sum_a' pi(a'|s') [mean(Q1', Q2')(s', a')
  - alpha log pi(a'|s')], value-clipped critic loss, and policy loss
  E_s[sum_a pi(a|s) (alpha log pi(a|s) - min(Q1, Q2)(s, a))] + lambda_k E_s[KL(pi_e || pi)].
Illegal actions are masked with logits -1e9.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from icml25.pipelines.ex2psro.bargaining import MLPPolicy

NEG = -1e9


def mlp(n_in: int, n_out: int, hidden: tuple[int, ...]) -> nn.Sequential:
    layers: list[nn.Module] = []
    width = n_in
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, n_out))
    return nn.Sequential(*layers)


def numpy_policy(net: nn.Sequential) -> MLPPolicy:
    """A numpy view of ``net`` (shares memory, so it follows in-place optimiser updates)."""
    linears = [m for m in net if isinstance(m, nn.Linear)]
    return MLPPolicy([(m.weight.detach().numpy().T, m.bias.detach().numpy()) for m in linears])


def policy_weights(net: nn.Sequential) -> list[tuple[np.ndarray, np.ndarray]]:
    """Copied numpy weights ``[(W, b)]`` of ``net`` (W: in x out) for storage and MLPPolicy."""
    return [(m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy())
            for m in net if isinstance(m, nn.Linear)]


def masked_log_softmax(logits: torch.Tensor, legal: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(torch.where(legal, logits, torch.full_like(logits, NEG)), dim=-1)


def kl_exploration_policy(logp_e: torch.Tensor, logp: torch.Tensor,
                          legal: torch.Tensor) -> torch.Tensor:
    """Per-state KL(pi_e || pi) = sum_a pi_e(a) (log pi_e(a) - log pi(a)) over legal actions."""
    terms = torch.where(legal, logp_e.exp() * (logp_e - logp), torch.zeros_like(logp))
    return terms.sum(-1)


def behaviour_clone(obs: np.ndarray, actions: np.ndarray, hidden: tuple[int, ...], n_actions: int,
                    lr: float, batch: int, epochs: int, min_loss: float, seed: int,
                    max_steps: int | None = None) -> tuple[nn.Sequential, list[float]]:
    """Fit a fresh MLP to (obs, action) pairs by cross-entropy; returns (net, epoch losses)."""
    if len(obs) == 0 or len(obs) != len(actions):
        raise ValueError(f"behaviour cloning needs matching non-empty data, got {len(obs)} "
                         f"observations and {len(actions)} actions")
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    net = mlp(obs.shape[1], n_actions, hidden)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    x = torch.as_tensor(obs, dtype=torch.float32)
    y = torch.as_tensor(actions, dtype=torch.long)
    losses: list[float] = []
    steps = 0
    for _ in range(epochs):
        order = torch.randperm(len(x), generator=gen)
        total, count = 0.0, 0
        for start in range(0, len(x), batch):
            idx = order[start:start + batch]
            loss = nn.functional.cross_entropy(net(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * len(idx)
            count += len(idx)
            steps += 1
            if max_steps is not None and steps >= max_steps:
                break
        losses.append(total / count)
        if losses[-1] < min_loss or (max_steps is not None and steps >= max_steps):
            break
    return net, losses


@dataclass(frozen=True)
class SACConfig:
    hidden: tuple[int, ...] = (50, 50)
    alpha: float = 0.01
    gamma: float = 0.99
    lr_pi: float = 3e-5
    lr_q: float = 3e-4
    tau: float = 0.005
    value_clip: float = 0.2
    batch: int = 64


class DiscreteSAC:
    """Discrete SAC learner with an optional KL(pi_e || pi) regulariser (weight ``kl_weight``)."""

    def __init__(self, n_obs: int, n_actions: int, cfg: SACConfig, seed: int,
                 exploration: nn.Sequential | None = None, kl_weight: float = 0.0):
        torch.manual_seed(seed)
        self.cfg = cfg
        self.policy = mlp(n_obs, n_actions, cfg.hidden)
        self.q1 = mlp(n_obs, n_actions, cfg.hidden)
        self.q2 = mlp(n_obs, n_actions, cfg.hidden)
        self.q1_target = copy.deepcopy(self.q1).requires_grad_(False)
        self.q2_target = copy.deepcopy(self.q2).requires_grad_(False)
        self.opt_pi = torch.optim.Adam(self.policy.parameters(), lr=cfg.lr_pi)
        self.opt_q = torch.optim.Adam([*self.q1.parameters(), *self.q2.parameters()],
                                      lr=cfg.lr_q)
        self.exploration = exploration.requires_grad_(False) if exploration is not None else None
        self.kl_weight = float(kl_weight) if exploration is not None else 0.0

    def critic_target(self, reward, next_obs, next_legal, done) -> torch.Tensor:
        with torch.no_grad():
            logp = masked_log_softmax(self.policy(next_obs), next_legal)
            q_mean = 0.5 * (self.q1_target(next_obs) + self.q2_target(next_obs))
            soft = torch.where(next_legal, logp.exp() * (q_mean - self.cfg.alpha * logp),
                               torch.zeros_like(logp)).sum(-1)
            return reward + self.cfg.gamma * (1.0 - done) * soft

    def critic_loss(self, obs, action, target) -> torch.Tensor:
        c = self.cfg.value_clip
        loss = 0.0
        for q, q_target in ((self.q1, self.q1_target), (self.q2, self.q2_target)):
            pred = q(obs).gather(1, action[:, None]).squeeze(1)
            with torch.no_grad():
                old = q_target(obs).gather(1, action[:, None]).squeeze(1)
            clipped = old + torch.clamp(pred - old, -c, c)
            loss = loss + torch.maximum((pred - target) ** 2, (clipped - target) ** 2).mean()
        return loss

    def policy_loss(self, obs, legal) -> tuple[torch.Tensor, torch.Tensor]:
        logp = masked_log_softmax(self.policy(obs), legal)
        with torch.no_grad():
            q_min = torch.minimum(self.q1(obs), self.q2(obs))
        sac = torch.where(legal, logp.exp() * (self.cfg.alpha * logp - q_min),
                          torch.zeros_like(logp)).sum(-1).mean()
        if self.exploration is None:
            return sac, torch.zeros(())
        logp_e = masked_log_softmax(self.exploration(obs), legal)
        kl = kl_exploration_policy(logp_e, logp, legal).mean()
        return sac + self.kl_weight * kl, kl.detach()

    def update(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        target = self.critic_target(batch["reward"], batch["next_obs"], batch["next_legal"],
                                    batch["done"])
        q_loss = self.critic_loss(batch["obs"], batch["action"], target)
        self.opt_q.zero_grad()
        q_loss.backward()
        self.opt_q.step()
        pi_loss, kl = self.policy_loss(batch["obs"], batch["legal"])
        self.opt_pi.zero_grad()
        pi_loss.backward()
        self.opt_pi.step()
        with torch.no_grad():
            for net, target_net in ((self.q1, self.q1_target), (self.q2, self.q2_target)):
                for p, tp in zip(net.parameters(), target_net.parameters(), strict=True):
                    tp.mul_(1.0 - self.cfg.tau).add_(self.cfg.tau * p)
        return {"q_loss": float(q_loss.detach()), "pi_loss": float(pi_loss.detach()),
                "kl": float(kl)}


class ReplayBuffer:
    """Fixed-capacity ring buffer of learner transitions (numpy)."""

    def __init__(self, capacity: int, n_obs: int, n_actions: int):
        self.capacity = capacity
        self.obs = np.zeros((capacity, n_obs), np.float32)
        self.next_obs = np.zeros((capacity, n_obs), np.float32)
        self.legal = np.zeros((capacity, n_actions), bool)
        self.next_legal = np.ones((capacity, n_actions), bool)
        self.action = np.zeros(capacity, np.int64)
        self.reward = np.zeros(capacity, np.float32)
        self.done = np.zeros(capacity, np.float32)
        self.size = 0
        self._next = 0

    def add(self, obs, legal, action, reward, next_obs, next_legal, done) -> None:
        i = self._next
        self.obs[i], self.legal[i], self.action[i], self.reward[i] = obs, legal, action, reward
        self.next_obs[i], self.next_legal[i], self.done[i] = next_obs, next_legal, done
        self._next = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch: int, rng: np.random.Generator) -> dict[str, torch.Tensor]:
        idx = rng.integers(self.size, size=batch)
        return {"obs": torch.from_numpy(self.obs[idx]), "legal": torch.from_numpy(self.legal[idx]),
                "action": torch.from_numpy(self.action[idx]),
                "reward": torch.from_numpy(self.reward[idx]),
                "next_obs": torch.from_numpy(self.next_obs[idx]),
                "next_legal": torch.from_numpy(self.next_legal[idx]),
                "done": torch.from_numpy(self.done[idx])}
