from dataclasses import replace
from pathlib import Path

import pytest
import torch
from torch import nn

from icml25.core.device import seed_everything
from icml25.core.training import TrainLoopConfig, load_checkpoint, save_checkpoint, train


def _batch_fn(step: int):
    g = torch.Generator().manual_seed(1000 + step)
    x = torch.randn(32, 5, generator=g)
    y = x @ torch.tensor([1.0, -2.0, 0.5, 0.0, 3.0]) + 0.1 * torch.randn(32, generator=g)
    return x, y


def _loss(model, batch):
    x, y = batch
    return nn.functional.mse_loss(model(x).squeeze(-1), y)


def _setup(seed: int = 0):
    seed_everything(seed)
    model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Dropout(0.2), nn.Linear(16, 1))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    sched = torch.optim.lr_scheduler.LinearLR(opt, 1.0, 0.1, total_iters=40)
    return model, opt, sched


def _weights(model):
    return {k: v.clone() for k, v in model.state_dict().items()}


def test_training_reduces_loss_and_logs_history():
    model, opt, _ = _setup()
    logged = []
    cfg = TrainLoopConfig(steps=200, log_every=50, progress=False)
    res = train(model, opt, _batch_fn, _loss, cfg, log_fn=lambda s, m: logged.append((s, m)))
    assert res.steps_done == 200
    assert [h["step"] for h in res.history] == [50, 100, 150, 200]
    assert res.history[-1]["train_loss"] < 0.2 * res.history[0]["train_loss"]
    assert [s for s, _ in logged] == [50, 100, 150, 200]
    assert not model.training


def test_resume_from_checkpoint_equals_uninterrupted_run(tmp_path: Path):
    cfg = TrainLoopConfig(steps=40, log_every=5, checkpoint_every=10,
                          checkpoint_dir=tmp_path / "full", progress=False)
    model, opt, sched = _setup()
    full = train(model, opt, _batch_fn, _loss, cfg, scheduler=sched)
    reference = _weights(model)

    cfg_int = replace(cfg, checkpoint_dir=tmp_path / "interrupted")
    model, opt, sched = _setup()
    # interrupted after 27 steps: the last checkpoint is step 20, steps 21-27 are lost
    partial = train(model, opt, _batch_fn, _loss, cfg_int, scheduler=sched, stop_after=27)
    assert partial.steps_done == 27
    assert load_checkpoint(tmp_path / "interrupted" / "checkpoint.pt")["step"] == 20

    model, opt, sched = _setup(seed=123)  # a fresh process: different init, restored from disk
    resumed = train(model, opt, _batch_fn, _loss, cfg_int, scheduler=sched)
    assert resumed.resumed_from == 20 and resumed.steps_done == 40
    for name, tensor in _weights(model).items():
        torch.testing.assert_close(tensor, reference[name], rtol=0, atol=0)
    assert [h["train_loss"] for h in resumed.history] == [h["train_loss"] for h in full.history]


def test_gradient_clipping_bounds_the_update():
    model = nn.Linear(5, 1, bias=False)
    nn.init.zeros_(model.weight)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)

    def huge_loss(m, batch):
        return 1e6 * m(batch[0]).sum()

    train(model, opt, _batch_fn, huge_loss,
          TrainLoopConfig(steps=1, grad_clip=0.5, progress=False))
    assert model.weight.norm().item() == pytest.approx(0.5, rel=1e-5)


def test_early_stopping_restores_best_weights():
    model, opt, _ = _setup()
    scores = iter([3.0, 2.0, 2.5, 2.6, 2.7, 1.0])
    snapshots = {}

    def eval_fn(m):
        step = len(snapshots) + 1
        snapshots[step] = _weights(m)
        return next(scores)

    cfg = TrainLoopConfig(steps=100, eval_every=5, early_stopping_patience=3, progress=False)
    res = train(model, opt, _batch_fn, _loss, cfg, eval_fn=eval_fn)
    assert res.stopped_early and res.steps_done == 25
    assert res.best_step == 10 and res.best_eval == 2.0
    for name, tensor in _weights(model).items():
        torch.testing.assert_close(tensor, snapshots[2][name])


def test_non_finite_loss_is_a_clear_error():
    model, opt, _ = _setup()
    with pytest.raises(FloatingPointError, match="loss is nan at step 1"):
        train(model, opt, _batch_fn, lambda m, b: torch.tensor(float("nan"), requires_grad=True),
              TrainLoopConfig(steps=3, progress=False))


def test_corrupt_checkpoint_is_named_and_kept(tmp_path: Path):
    path = tmp_path / "checkpoint.pt"
    path.write_bytes(b"not a checkpoint")
    model, opt, _ = _setup()
    cfg = TrainLoopConfig(steps=3, checkpoint_every=1, checkpoint_dir=tmp_path, progress=False)
    with pytest.raises(RuntimeError, match="cannot be read"):
        train(model, opt, _batch_fn, _loss, cfg)
    assert path.read_bytes() == b"not a checkpoint"


def test_checkpoint_roundtrip_is_weights_only(tmp_path: Path):
    path = tmp_path / "c.pt"
    save_checkpoint(path, {"step": 3, "w": torch.ones(2)})
    assert load_checkpoint(path)["step"] == 3
    assert not path.with_suffix(".tmp").exists()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"steps": 0}, "steps"), ({"steps": 5, "checkpoint_every": 2}, "checkpoint_dir"),
     ({"steps": 5, "early_stopping_patience": 2}, "eval_every"),
     ({"steps": 5, "log_every": -1}, "log_every")],
)
def test_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TrainLoopConfig(**kwargs)


def test_amp_on_the_cpu_runs_the_forward_in_bfloat16():
    from icml25.core.training import _autocast

    context, scaler = _autocast(torch.device("cpu"), True)
    with context:
        out = torch.nn.Linear(4, 3)(torch.randn(2, 4))
    assert out.dtype == torch.bfloat16 and scaler is None
    context, _ = _autocast(torch.device("cpu"), False)
    with context:
        assert torch.nn.Linear(4, 3)(torch.randn(2, 4)).dtype == torch.float32
