"""The meta-trained in-context transformer."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from icml25.core.datasets import TorchModelDataset
from icml25.pipelines.functional_tom.episodes import summarise_log
from icml25.pipelines.functional_tom.games import default_games
from icml25.pipelines.functional_tom.meta_agent import (
    InContextAgentNet,
    MetaConfig,
    evaluate_meta_agent,
    load_model,
    model_record,
    train_meta_agent,
)
from icml25.pipelines.functional_tom.optimal_play import solve
from icml25.pipelines.functional_tom.partners import build_partner

pytestmark = pytest.mark.usefixtures("one_thread")
GAMES = default_games()


def _net(n=3, max_len=12):
    torch.manual_seed(0)
    return InContextAgentNet(MetaConfig(n, d_model=16, n_layers=2, n_heads=2, d_ff=32,
                                        max_len=max_len)).eval()


def test_shapes_causal_masking_and_cached_steps_agree():
    net = _net()
    a = torch.randint(0, 4, (5, 12))
    b = torch.randint(0, 4, (5, 12))
    pol, tom = net(a, b)
    assert pol.shape == tom.shape == (5, 12, 3)
    a2, b2 = a.clone(), b.clone()
    a2[:, 7:], b2[:, 7:] = (a2[:, 7:] + 1) % 4, (b2[:, 7:] + 2) % 4
    pol2, tom2 = net(a2, b2)
    # changing inputs from position 7 on leaves the logits at positions <= 6 unchanged
    assert torch.allclose(pol[:, :7], pol2[:, :7], atol=1e-6)
    assert torch.allclose(tom[:, :7], tom2[:, :7], atol=1e-6)
    assert not torch.allclose(pol[:, 7:], pol2[:, 7:])
    cache: list = []
    with torch.no_grad():
        for t in range(12):
            p_t, q_t = net.step(a[:, t], b[:, t], cache, t)
            assert torch.allclose(p_t, pol[:, t], atol=1e-5)
            assert torch.allclose(q_t, tom[:, t], atol=1e-5)
    with pytest.raises(ValueError, match="max_len"):
        net(torch.zeros(1, 13, dtype=torch.long), torch.zeros(1, 13, dtype=torch.long))


def test_overfits_a_single_constant_partner():
    rps = GAMES["rps"]
    cfg = MetaConfig(3, d_model=32, n_layers=1, n_heads=2, d_ff=64, max_len=12)
    model, curve = train_meta_agent(rps, ["single"], cfg, steps=60, batch_size=16, lr=3e-3,
                                    weight_decay=0.0, grad_clip=1.0, eps_start=0.3,
                                    eps_end=0.05, seed=0, progress=False)
    assert curve[-1]["loss"] < curve[0]["loss"]
    specs = [{"family": "single", "action": k % 3} for k in range(6)]
    logs = evaluate_meta_agent(model, rps, specs, seed=0, act_mode="policy")
    regrets = [summarise_log(log, solve(rps, build_partner(rps, s), 12).v_star, 0.0).regret / 12
               for log, s in zip(logs, specs, strict=True)]
    assert np.mean(regrets) < 0.05 + 2 / 12  # optimal after at most two identification rounds
    # the ToM head learned the constant: after the first round it predicts it
    assert all((log["bhat"][1:] == log["b"][1:]).mean() > 0.9 for log in logs)


def test_state_dict_round_trip(tmp_path):
    net = _net()
    record = model_record(net, [{"step": 0, "loss": 1.0}], {"game": "rps"})
    ds = TorchModelDataset(str(tmp_path / "m.safetensors"))
    ds.save(record)
    back = load_model(ds.load())
    a = torch.randint(0, 4, (2, 12))
    assert torch.equal(back(a, a)[0], net(a, a)[0])


def test_tom_only_variant_needs_valid_weight():
    with pytest.raises(ValueError, match="policy_weight"):
        train_meta_agent(GAMES["ipd"], ["tft"], MetaConfig(2, 16, 1, 2, 32, 4), steps=1,
                         batch_size=2, lr=1e-3, weight_decay=0.0, grad_clip=1.0, eps_start=0.5,
                         eps_end=0.1, seed=0, policy_weight=0.5, progress=False)
