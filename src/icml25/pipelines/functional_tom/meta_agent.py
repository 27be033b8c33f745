"""A small transformer meta-trained in context over partner families (docs/papers/functional_tom.md).

Input token of round t encodes the previous round: ``emb_a(a_{t-1}) + emb_b(b_{t-1})`` (a START
index for t = 1); positions enter through rotary embeddings of the pre-norm causal decoder blocks
of :mod:`icml25.core.causal_lm` (RMSNorm, SwiGLU). Two linear heads on every position: the
**policy head** (own action logits) and the **ToM head** (partner's next-action logits).

Training (DAgger-style, privileged teacher): batches of episodes against partners drawn from the
training families are rolled out by the *student* (its own policy mixed with epsilon-uniform
exploration, epsilon linearly ``eps_start -> eps_end``); labels come from the teacher:
``a*_t`` = the DP-optimal action(s) of the true partner FSM at (t, z_t) (a uniform soft label over
tied optima) and the partner's realised action ``b_t``. Loss = CE(policy, a*) + CE(ToM, b).
A ToM-only model (``policy_weight = 0``) acts by myopic best response to its ToM head, both in
its rollouts and at evaluation (variant (c)).

Evaluation variants: ``policy`` (a: act with the policy head), ``tom_br`` (b: same network, act
by myopic best response ``argmax_a R[a, :] @ p_ToM``), ``tom_only`` (c: the ToM-only model with
myopic best response). Every episode of a cell is rolled out in one batched forward per round.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from icml25.core.causal_lm import DecoderBlock, LlamaConfig, RMSNorm, apply_rotary, rotary_tables
from icml25.pipelines.functional_tom.episodes import LOG_COLUMNS, myopic_best_response
from icml25.pipelines.functional_tom.games import Game
from icml25.pipelines.functional_tom.optimal_play import solve
from icml25.pipelines.functional_tom.partners import (
    PartnerFSM,
    build_partner,
    sample_partner_spec,
)

META_VARIANTS = ("policy", "tom_br", "tom_only")


@dataclass(frozen=True)
class MetaConfig:
    n_actions: int
    d_model: int = 64
    n_layers: int = 2
    n_heads: int = 4
    d_ff: int = 256
    max_len: int = 50


class InContextAgentNet(nn.Module):
    """Causal transformer over previous-round tokens with a policy head and a ToM head."""

    def __init__(self, cfg: MetaConfig) -> None:
        super().__init__()
        self.cfg = cfg
        block_cfg = LlamaConfig(vocab_size=1, d_model=cfg.d_model, n_layers=cfg.n_layers,
                                n_heads=cfg.n_heads, d_ff=cfg.d_ff, max_seq_len=cfg.max_len)
        self.emb_a = nn.Embedding(cfg.n_actions + 1, cfg.d_model)  # index n_actions = START
        self.emb_b = nn.Embedding(cfg.n_actions + 1, cfg.d_model)
        self.layers = nn.ModuleList(DecoderBlock(block_cfg) for _ in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.d_model)
        self.policy_head = nn.Linear(cfg.d_model, cfg.n_actions)
        self.tom_head = nn.Linear(cfg.d_model, cfg.n_actions)
        cos, sin = rotary_tables(cfg.d_model // cfg.n_heads, cfg.max_len)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        for module in self.modules():
            if isinstance(module, nn.Linear | nn.Embedding):
                nn.init.normal_(module.weight, std=0.02)

    def forward(self, prev_a: torch.Tensor, prev_b: torch.Tensor
                ) -> tuple[torch.Tensor, torch.Tensor]:
        """``prev_a``, ``prev_b``: ``[batch, t]`` previous-round actions (START at position 0);
        returns policy and ToM logits, each ``[batch, t, n_actions]``."""
        t = prev_a.shape[1]
        if t > self.cfg.max_len:
            raise ValueError(f"episode length {t} exceeds the model's max_len {self.cfg.max_len}")
        x = self.emb_a(prev_a) + self.emb_b(prev_b)
        cos, sin = self.rope_cos[:t], self.rope_sin[:t]
        for layer in self.layers:
            x = layer(x, cos, sin)
        x = self.norm(x)
        return self.policy_head(x), self.tom_head(x)

    def step(self, a_prev: torch.Tensor, b_prev: torch.Tensor, cache: list, t: int
             ) -> tuple[torch.Tensor, torch.Tensor]:
        """Incremental forward of position ``t`` only (``[batch]`` tokens) with a key/value
        ``cache`` (a list, filled in place): identical to ``forward`` on the whole prefix (tested)
        at O(t) instead of O(t^2) cost per round, so rollouts stay cheap on a CPU."""
        if t >= self.cfg.max_len:
            raise ValueError(f"episode length {t + 1} exceeds the model's max_len "
                             f"{self.cfg.max_len}")
        x = (self.emb_a(a_prev) + self.emb_b(b_prev))[:, None, :]
        cos, sin = self.rope_cos[t: t + 1], self.rope_sin[t: t + 1]
        for i, layer in enumerate(self.layers):
            attn = layer.self_attn
            h = layer.input_norm(x)
            shape = (x.shape[0], 1, attn.n_heads, attn.head_dim)
            q = apply_rotary(attn.q_proj(h).view(shape).transpose(1, 2), cos, sin)
            k = apply_rotary(attn.k_proj(h).view(shape).transpose(1, 2), cos, sin)
            v = attn.v_proj(h).view(shape).transpose(1, 2)
            if len(cache) <= i:
                cache.append((k, v))
            else:
                k = torch.cat([cache[i][0], k], dim=2)
                v = torch.cat([cache[i][1], v], dim=2)
                cache[i] = (k, v)
            out = F.scaled_dot_product_attention(q, k, v)  # the new token sees every cached one
            x = x + attn.o_proj(out.transpose(1, 2).reshape(x.shape[0], 1, -1))
            x = x + layer.mlp(layer.post_attention_norm(x))
        x = self.norm(x)[:, 0]
        return self.policy_head(x), self.tom_head(x)


@dataclass
class PartnerBatch:
    """Padded tables of N partner FSMs and their DP solutions for batched rollouts."""

    probs: np.ndarray       # [N, Z, B]
    next_state: np.ndarray  # [N, Z, A, B]
    z0: np.ndarray          # [N]
    q: np.ndarray           # [N, T+1, Z, A]
    v_star: np.ndarray      # [N]
    r_star: np.ndarray      # [N, T]


_SOLVED: dict = {}


def partner_batch(game: Game, partners: Sequence[PartnerFSM], horizon: int) -> PartnerBatch:
    z_max = max(p.n_states for p in partners)
    n, count = game.n_actions, len(partners)
    probs = np.zeros((count, z_max, n))
    probs[:, :, 0] = 1.0  # padding states are never reached
    nxt = np.zeros((count, z_max, n, n), dtype=np.int64)
    q = np.zeros((count, horizon + 1, z_max, n))
    v_star, r_star = np.zeros(count), np.zeros((count, horizon))
    for i, p in enumerate(partners):
        key = (game.name, game.payoff.tobytes(), p.name, horizon)
        if key not in _SOLVED:
            _SOLVED[key] = solve(game, p, horizon)
        opt = _SOLVED[key]
        probs[i, : p.n_states], nxt[i, : p.n_states] = p.probs, p.next_state
        q[i, :, : p.n_states] = opt.q
        v_star[i], r_star[i] = opt.v_star, opt.r_star
    return PartnerBatch(probs, nxt, np.array([p.z0 for p in partners]), q, v_star, r_star)


def _sample_rows(probs: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """One categorical draw per row of ``probs`` ([N, K])."""
    u = rng.random(probs.shape[0])[:, None]
    return np.minimum((probs.cumsum(1) < u).sum(1), probs.shape[1] - 1)


@torch.no_grad()
def rollout(model: InContextAgentNet, game: Game, batch: PartnerBatch, horizon: int,
            rng: np.random.Generator, act_mode: str = "policy", eps: float = 0.0,
            greedy: bool = True) -> dict[str, np.ndarray]:
    """Play ``horizon`` rounds for every partner in ``batch`` at once.

    ``act_mode``: ``policy`` (policy head) or ``tom_br`` (myopic best response to the ToM head).
    ``greedy``: argmax of the policy head, else a sample from it; ``eps``: probability of a
    uniformly random action. Returns arrays ``[N, T]`` of a, b, r, the ToM distribution's
    probability of b, the predicted bhat, the soft DP-optimal action labels ``[N, T, A]``.
    """
    n_ep, n = batch.probs.shape[0], game.n_actions
    device = next(model.parameters()).device
    payoff = torch.as_tensor(game.payoff, dtype=torch.float32, device=device)
    prev_a = torch.full((n_ep, horizon), n, dtype=torch.long, device=device)
    prev_b = torch.full((n_ep, horizon), n, dtype=torch.long, device=device)
    out = {k: np.zeros((n_ep, horizon), dtype=np.int64) for k in ("a", "b", "bhat")}
    out["r"], out["p_b"] = np.zeros((n_ep, horizon)), np.zeros((n_ep, horizon))
    out["tom_probs"] = np.zeros((n_ep, horizon, n))
    labels = np.zeros((n_ep, horizon, n))
    z = batch.z0.copy()
    rows = np.arange(n_ep)
    cache: list = []
    for t in range(horizon):
        pol, tom = model.step(prev_a[:, t], prev_b[:, t], cache, t)
        pol, tom = pol.float(), tom.float().softmax(-1)
        if act_mode == "policy":
            a = (pol.argmax(-1).cpu().numpy() if greedy
                 else _sample_rows(pol.softmax(-1).cpu().numpy(), rng))
        elif act_mode == "tom_br":
            a = (tom @ payoff.T).argmax(-1).cpu().numpy()
        else:
            raise ValueError(f"act_mode: got {act_mode!r}; expected policy|tom_br")
        explore = rng.random(n_ep) < eps
        a = np.where(explore, rng.integers(n, size=n_ep), a)
        b = _sample_rows(batch.probs[rows, z], rng)
        q_t = batch.q[rows, horizon - t, z]  # [N, A]
        opt_mask = q_t >= q_t.max(1, keepdims=True) - 1e-9
        labels[:, t] = opt_mask / opt_mask.sum(1, keepdims=True)
        tom_np = tom.cpu().numpy()
        out["a"][:, t], out["b"][:, t], out["r"][:, t] = a, b, game.payoff[a, b]
        out["bhat"][:, t], out["p_b"][:, t] = tom_np.argmax(1), tom_np[rows, b]
        out["tom_probs"][:, t] = tom_np
        z = batch.next_state[rows, z, a, b]
        if t + 1 < horizon:
            prev_a[:, t + 1] = torch.as_tensor(a, device=device)
            prev_b[:, t + 1] = torch.as_tensor(b, device=device)
    out["labels"] = labels
    out["prev_a"], out["prev_b"] = prev_a.cpu().numpy(), prev_b.cpu().numpy()
    return out


def train_meta_agent(game: Game, families: Sequence[str], cfg: MetaConfig, *, steps: int,
                     batch_size: int, lr: float, weight_decay: float, grad_clip: float,
                     eps_start: float, eps_end: float, seed: int, policy_weight: float = 1.0,
                     progress: bool = True, device: str | torch.device = "cpu"
                     ) -> tuple[InContextAgentNet, list[dict]]:
    """Meta-train one model for ``game``; returns it and its per-step training curve."""
    if policy_weight not in (0.0, 1.0):
        raise ValueError("policy_weight is 1 (policy + ToM loss) or 0 (ToM-only model)")
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    model = InContextAgentNet(cfg).to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    horizon = cfg.max_len
    act_mode = "policy" if policy_weight > 0 else "tom_br"
    curve = []
    bar = tqdm(range(steps), desc=f"meta-train {game.name} ({act_mode}, seed {seed})",
               disable=not progress, leave=False)
    for step in bar:
        frac = step / max(steps - 1, 1)
        eps = eps_start + (eps_end - eps_start) * frac
        specs = [sample_partner_spec(game, families[int(rng.integers(len(families)))], rng,
                                     episode=int(rng.integers(game.n_actions)))
                 for _ in range(batch_size)]
        batch = partner_batch(game, [build_partner(game, s) for s in specs], horizon)
        model.eval()
        roll = rollout(model, game, batch, horizon, rng, act_mode=act_mode, eps=eps,
                       greedy=False)
        model.train()
        pol_logits, tom_logits = model(torch.as_tensor(roll["prev_a"], device=device),
                                       torch.as_tensor(roll["prev_b"], device=device))
        tom_loss = F.cross_entropy(tom_logits.reshape(-1, cfg.n_actions).float(),
                                   torch.as_tensor(roll["b"], device=device).reshape(-1))
        pol_loss = -(torch.as_tensor(roll["labels"], dtype=torch.float32, device=device)
                     * pol_logits.float().log_softmax(-1)).sum(-1).mean()
        loss = policy_weight * pol_loss + tom_loss
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
        opt.step()
        regret = float(np.mean(batch.v_star - roll["r"].sum(1))) / horizon
        curve.append({"step": step, "loss": float(loss.detach()),
                      "policy_loss": float(pol_loss.detach()), "tom_loss": float(tom_loss.detach()), "train_regret_per_step": regret, "eps": eps})
        bar.set_postfix(loss=f"{float(loss.detach()):.3f}", regret=f"{regret:.2f}")
    model.eval()
    return model, curve


def evaluate_meta_agent(model: InContextAgentNet, game: Game, specs: Sequence[dict],
                        seed: int, act_mode: str) -> list[pd.DataFrame]:
    """Greedy evaluation against the partners ``specs`` (one batched rollout); one per-round
    log per episode with the columns of :data:`~.episodes.LOG_COLUMNS`."""
    horizon = model.cfg.max_len
    batch = partner_batch(game, [build_partner(game, s) for s in specs], horizon)
    roll = rollout(model, game, batch, horizon, np.random.default_rng(seed), act_mode=act_mode)
    br = np.array([myopic_best_response(game, b) for b in range(game.n_actions)])
    logs = []
    for i in range(len(specs)):
        bhat, b = roll["bhat"][i], roll["b"][i]
        logs.append(pd.DataFrame({
            "t": np.arange(1, horizon + 1), "a": roll["a"][i], "b": b, "r": roll["r"][i],
            "bhat": bhat, "p_b": roll["p_b"][i], "r_star": batch.r_star[i],
            "r_tom": game.payoff[br[bhat], b], "invalid": False, "invalid_prediction": False,
            "raw": "",
        })[list(LOG_COLUMNS)])
    return logs


def model_record(model: InContextAgentNet, curve: list[dict], meta: dict) -> dict:
    """``{"state_dict", "metadata"}`` for :class:`icml25.core.datasets.TorchModelDataset`."""
    return {"state_dict": {k: v.cpu() for k, v in model.state_dict().items()},
            "metadata": {"config": asdict(model.cfg), "curve": curve, **meta}}


def load_model(record: dict, device: str | torch.device = "cpu") -> InContextAgentNet:
    meta = record["metadata"]
    cfg = MetaConfig(**(json.loads(meta["config"]) if isinstance(meta["config"], str)
                        else meta["config"]))
    model = InContextAgentNet(cfg)
    model.load_state_dict(record["state_dict"])
    return model.to(device).eval()
