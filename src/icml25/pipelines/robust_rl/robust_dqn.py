"""Robust DQN on a continuing CartPole (docs/papers/robust_rl.md, "The method").

* :class:`ContinuingCartPole` wraps gymnasium's ``CartPole-v1`` (unwrapped, no time limit) as a
  continuing task: reward 1 per step; on failure reward 0, the state is reset and the episode
  goes on (``terminated`` is never reported). Test-time perturbations change the pole length,
  the pole mass and the force magnitude, and replace the action by a random one with probability
  ``action_noise`` (the contamination model made concrete).
* :func:`train_dqn`: DQN (Mnih et al. 2015) with the contamination-robust target
  ``y = r + gamma [(1 - R) max_a' Q_targ(s', a') + R min_{s~ in batch} max_a' Q_targ(s~, a')]``,
  no terminal masking (resets are ordinary transitions), Huber loss, Adam, replay buffer, target
  network refreshed every ``target_update`` steps. ``R = 0`` is the non-robust DQN.
* :func:`evaluate_grid`: the greedy policy's average reward over ``steps`` steps in every cell of
  the perturbation grid, all cells stepped together with one batched forward pass per step.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from tqdm.auto import tqdm


class ContinuingCartPole:
    """CartPole-v1 as a continuing task with editable physics; see the module docstring."""

    def __init__(self, seed: int, length_scale: float = 1.0, masspole_scale: float = 1.0,
                 force_scale: float = 1.0, action_noise: float = 0.0) -> None:
        import gymnasium as gym

        if not 0.0 <= action_noise <= 1.0:
            raise ValueError(f"action_noise must lie in [0, 1]; got {action_noise}")
        for name, value in (("length_scale", length_scale), ("masspole_scale", masspole_scale),
                            ("force_scale", force_scale)):
            if not value > 0:
                raise ValueError(f"{name} must be > 0; got {value}")
        self.env = gym.make("CartPole-v1").unwrapped
        e = self.env
        e.length = e.length * length_scale
        e.masspole = e.masspole * masspole_scale
        e.force_mag = e.force_mag * force_scale
        # derived constants are cached in __init__ by gymnasium: keep them consistent
        e.total_mass = e.masspole + e.masscart
        e.polemass_length = e.masspole * e.length
        self.action_noise = action_noise
        self.rng = np.random.default_rng(seed)
        self.state, _ = e.reset(seed=seed)
        self.failures = 0

    @property
    def n_actions(self) -> int:
        return 2

    def step(self, action: int) -> tuple[np.ndarray, float, bool, bool, dict]:
        """One continuing step: ``(obs, reward, terminated=False, truncated=False, info)``."""
        if self.action_noise and self.rng.random() < self.action_noise:
            action = int(self.rng.integers(2))
        obs, _, terminated, _, info = self.env.step(int(action))
        if terminated:
            self.failures += 1
            obs, _ = self.env.reset(seed=int(self.rng.integers(2**31)))
            self.state = obs
            return obs, 0.0, False, False, {**info, "failure": True}
        self.state = obs
        return obs, 1.0, False, False, {**info, "failure": False}


def q_network(obs_dim: int, n_actions: int, hidden: list[int]) -> nn.Module:
    layers, width = [], obs_dim
    for h in hidden:
        layers += [nn.Linear(width, h), nn.ReLU()]
        width = h
    layers.append(nn.Linear(width, n_actions))
    return nn.Sequential(*layers)


def robust_target(q_target_next: torch.Tensor, rewards: torch.Tensor, gamma: float,
                  radius: float) -> torch.Tensor:
    """``r + gamma [(1 - R) max_a' Q(s', a') + R min_batch max_a' Q(s~, a')]`` (no masking)."""
    v_next = q_target_next.max(dim=1).values
    return rewards + gamma * ((1.0 - radius) * v_next + radius * v_next.min())


@dataclass(frozen=True)
class DQNConfig:
    steps: int
    gamma: float
    radius: float
    hidden: tuple[int, ...] = (64, 64)
    lr: float = 1e-3
    buffer: int = 100_000
    batch: int = 128
    target_update: int = 1000
    learning_starts: int = 1000
    explore_start: float = 1.0
    explore_end: float = 0.05
    explore_fraction: float = 0.1


def train_dqn(cfg: DQNConfig, seed: int, device: torch.device, progress: bool = True,
              desc: str = "dqn") -> tuple[nn.Module, list[dict]]:
    """Train on the nominal continuing CartPole; returns the online network and a loss/reward
    history (one entry per 1 000 steps)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    env = ContinuingCartPole(seed)
    net = q_network(4, 2, list(cfg.hidden)).to(device)
    target = q_network(4, 2, list(cfg.hidden)).to(device)
    target.load_state_dict(net.state_dict())
    opt = torch.optim.Adam(net.parameters(), lr=cfg.lr)
    size = min(cfg.buffer, cfg.steps)
    obs_buf = np.zeros((size, 4), np.float32)
    next_buf = np.zeros((size, 4), np.float32)
    act_buf = np.zeros(size, np.int64)
    rew_buf = np.zeros(size, np.float32)
    obs = env.state.astype(np.float32)
    history, losses, rewards = [], [], []
    decay = max(1, int(cfg.explore_fraction * cfg.steps))
    for t in tqdm(range(cfg.steps), desc=desc, disable=not progress, leave=False,
                  mininterval=1.0):
        eps = cfg.explore_end + (cfg.explore_start - cfg.explore_end) * max(0.0, 1 - t / decay)
        if rng.random() < eps:
            action = int(rng.integers(2))
        else:
            with torch.no_grad():
                action = int(net(torch.as_tensor(obs, device=device)[None]).argmax())
        nxt, reward, _, _, _ = env.step(action)
        i = t % size
        obs_buf[i], next_buf[i], act_buf[i], rew_buf[i] = obs, nxt, action, reward
        obs = nxt.astype(np.float32)
        rewards.append(reward)
        if t + 1 >= cfg.learning_starts:
            idx = rng.integers(min(t + 1, size), size=cfg.batch)
            o = torch.as_tensor(obs_buf[idx], device=device)
            n = torch.as_tensor(next_buf[idx], device=device)
            a = torch.as_tensor(act_buf[idx], device=device)
            r = torch.as_tensor(rew_buf[idx], device=device)
            with torch.no_grad():
                y = robust_target(target(n), r, cfg.gamma, cfg.radius)
            q = net(o).gather(1, a[:, None])[:, 0]
            loss = nn.functional.smooth_l1_loss(q, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.detach()))
        if (t + 1) % cfg.target_update == 0:
            target.load_state_dict(net.state_dict())
        if (t + 1) % 1000 == 0 or t + 1 == cfg.steps:
            history.append({"step": t + 1, "train_avg_reward": float(np.mean(rewards)),
                            "loss": float(np.mean(losses)) if losses else float("nan")})
            rewards, losses = [], []
    return net, history


def perturbation_grid(length: list[float], masspole: list[float], force: list[float],
                      action_noise: list[float]) -> list[dict]:
    """Every combination of the test-time perturbations (by default 4 x 3 x 2 x 3 = 72 cells)."""
    return [{"length_scale": ln, "masspole_scale": m, "force_scale": f, "action_noise": p}
            for ln, m, f, p in itertools.product(length, masspole, force, action_noise)]


def evaluate_grid(net: nn.Module, grid: list[dict], steps: int, seed: int,
                  device: torch.device, progress: bool = False, desc: str = "test grid"
                  ) -> list[dict]:
    """Average reward of the greedy policy over ``steps`` continuing steps in every cell."""
    envs = [ContinuingCartPole(seed + 1000 + i, **cell) for i, cell in enumerate(grid)]
    obs = np.stack([e.state for e in envs]).astype(np.float32)
    total = np.zeros(len(envs))
    net.eval()
    for _ in tqdm(range(steps), desc=desc, disable=not progress, leave=False, mininterval=1.0):
        with torch.no_grad():
            actions = net(torch.as_tensor(obs, device=device)).argmax(dim=1).cpu().numpy()
        for i, (env, a) in enumerate(zip(envs, actions, strict=True)):
            o, r, _, _, _ = env.step(int(a))
            obs[i] = o
            total[i] += r
    return [{**cell, "avg_reward": total[i] / steps, "failures": envs[i].failures}
            for i, cell in enumerate(grid)]
