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


def _no_dropout_setup():
    seed_everything(0)
    model = nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 1))
    return model, torch.optim.Adam(model.parameters(), lr=1e-2)


@pytest.mark.parametrize("micro", [2, 4, 32])
def test_micro_batches_train_the_same_weights_as_the_whole_batch(micro):
    whole, opt = _no_dropout_setup()
    ref = train(whole, opt, _batch_fn, _loss, TrainLoopConfig(steps=5, log_every=1,
                                                              progress=False))
    model, opt = _no_dropout_setup()
    seen = []

    def loss(m, batch):
        seen.append(batch[0].shape[0])
        return _loss(m, batch)

    res = train(model, opt, _batch_fn, loss,
                TrainLoopConfig(steps=5, log_every=1, progress=False, micro_batches=micro))
    assert seen == [32 // micro] * (5 * micro)        # each forward saw one part only
    for name, tensor in _weights(model).items():
        torch.testing.assert_close(tensor, _weights(whole)[name], atol=1e-6, rtol=1e-5)
    for got, want in zip(res.history, ref.history, strict=True):
        assert got["train_loss"] == pytest.approx(want["train_loss"], rel=1e-5)


def _token_batch(step: int):
    # a mean over tokens with ignored positions: the parts hold different numbers of tokens
    g = torch.Generator().manual_seed(step)
    x = torch.randn(8, 6, 3, generator=g)
    y = x.sum(-1)
    mask = torch.ones(8, 6, dtype=torch.bool)
    mask[:4, 2:] = False                                 # the first half keeps 2 of 6 tokens
    return x, y, mask


def _token_loss(model, batch):
    x, y, mask = batch
    return ((model(x).squeeze(-1) - y) ** 2)[mask].mean()


def test_micro_batch_weight_makes_a_token_mean_exact():
    def run(**kw):
        seed_everything(0)
        model = nn.Linear(3, 1)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        train(model, opt, _token_batch, _token_loss,
              TrainLoopConfig(steps=3, progress=False, grad_clip=None, **kw))
        return _weights(model)

    whole = run()
    tokens = run(micro_batches=2, micro_batch_weight=lambda b: float(b[2].sum()))
    examples = run(micro_batches=2)
    for name in whole:
        torch.testing.assert_close(tokens[name], whole[name], atol=1e-6, rtol=1e-5)
    # weighing the parts by examples is a different loss here (16 tokens against 48)
    assert max(float((examples[n] - whole[n]).abs().max()) for n in whole) > 1e-3


def test_micro_batches_that_do_not_divide_the_batch_are_refused():
    model, opt = _no_dropout_setup()
    before = _weights(model)
    with pytest.raises(ValueError, match="micro_batches: 3 does not divide the batch of 32"):
        train(model, opt, _batch_fn, _loss,
              TrainLoopConfig(steps=2, progress=False, micro_batches=3))
    with pytest.raises(ValueError, match="share one first dimension"):
        train(model, opt, lambda s: (torch.zeros(4, 5), torch.zeros(2)), _loss,
              TrainLoopConfig(steps=2, progress=False, micro_batches=2))
    assert all(torch.equal(v, before[k]) for k, v in _weights(model).items())
    with pytest.raises(ValueError, match="micro_batches: got 0"):
        TrainLoopConfig(steps=2, micro_batches=0)


def test_split_batch_cuts_nested_batches_and_shares_other_leaves():
    from icml25.core.training import split_batch

    x = torch.arange(6)
    parts = split_batch({"x": x, "pair": (x * 2, [x * 3]), "name": "a"}, 3)
    assert [p["x"].tolist() for p in parts] == [[0, 1], [2, 3], [4, 5]]
    assert parts[1]["pair"][0].tolist() == [4, 6] and parts[2]["pair"][1][0].tolist() == [12, 15]
    assert all(p["name"] == "a" for p in parts)
    assert split_batch(x, 1)[0] is x
