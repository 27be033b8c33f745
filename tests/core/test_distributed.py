"""Data-parallel training: two gloo processes under torchrun give the single-process result."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from icml25.core.distributed import SINGLE, DistContext, all_reduce_mean, context_from_env, shard
from icml25.core.training import TrainLoopConfig, train

# The job both the test and the torchrun workers run: a batch is a pure function of the step.
JOB = textwrap.dedent(
    """
    import torch
    from torch import nn

    def make_model():
        torch.manual_seed(0)
        return nn.Sequential(nn.Linear(5, 16), nn.Tanh(), nn.Linear(16, 1))

    def batch_fn(step):
        g = torch.Generator().manual_seed(1000 + step)
        x = torch.randn(8, 5, generator=g)
        return x, x.sum(dim=1, keepdim=True).sin()

    def loss_fn(model, batch):
        x, y = batch
        return ((model(x) - y) ** 2).mean()
    """
)

WORKER = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import torch

    import job
    from icml25.core.distributed import init_distributed, shutdown
    from icml25.core.training import TrainLoopConfig, train

    out, steps, stop_after = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    micro = int(sys.argv[4])
    ctx = init_distributed()
    model = job.make_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    config = TrainLoopConfig(steps=steps, log_every=2, checkpoint_every=3,
                             checkpoint_dir=out / "ckpt", progress=False, micro_batches=micro)
    logged = []
    result = train(model, opt, job.batch_fn, job.loss_fn, config, dist_ctx=ctx,
                   log_fn=lambda step, m: logged.append(step),
                   stop_after=None if stop_after == "none" else int(stop_after))
    torch.save({"state": model.state_dict(), "history": result.history, "logged": logged},
               out / f"rank{ctx.rank}.pt")
    shutdown()
    """
)


def _job_module(tmp_path: Path):
    (tmp_path / "job.py").write_text(JOB)
    (tmp_path / "worker.py").write_text(WORKER)
    sys.path.insert(0, str(tmp_path))
    try:
        import importlib

        import job  # type: ignore[import-not-found]

        return importlib.reload(job)
    finally:
        sys.path.remove(str(tmp_path))


def _torchrun(tmp_path: Path, nproc: int, steps: int, stop_after: str = "none",
              micro: int = 1) -> None:
    torchrun = Path(sys.executable).with_name("torchrun")
    if not torchrun.exists():
        torchrun = shutil.which("torchrun")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [str(torchrun), "--standalone", f"--nproc_per_node={nproc}", str(tmp_path / "worker.py"),
         str(tmp_path), str(steps), stop_after, str(micro)],
        env=env, capture_output=True, text=True, timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def _single(job, steps: int) -> tuple[dict, list]:
    model = job.make_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    result = train(model, opt, job.batch_fn, job.loss_fn,
                   TrainLoopConfig(steps=steps, log_every=2, progress=False))
    return model.state_dict(), result.history


def test_context_from_env():
    assert context_from_env({}) == SINGLE
    ctx = context_from_env({"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1"})
    assert (ctx.rank, ctx.world_size, ctx.enabled, ctx.is_main) == (1, 2, True, False)
    with pytest.raises(ValueError, match="inconsistent"):
        context_from_env({"RANK": "2", "WORLD_SIZE": "2"})


def test_shard_takes_interleaved_rows_and_refuses_uneven_batches():
    ctx = DistContext(rank=1, world_size=2)
    x = torch.arange(6)
    got = shard((x, {"y": x * 10}), ctx)
    assert got[0].tolist() == [1, 3, 5]
    assert got[1]["y"].tolist() == [10, 30, 50]
    assert shard(x, SINGLE) is x
    with pytest.raises(ValueError, match="does not split evenly"):
        shard(torch.arange(5), ctx)
    assert all_reduce_mean(2.5, SINGLE) == 2.5


@pytest.mark.slow
def test_two_gloo_processes_match_single_process_and_resume_across_world_size(tmp_path):
    job = _job_module(tmp_path)
    expected, history = _single(job, steps=6)

    _torchrun(tmp_path, nproc=2, steps=6)
    ranks = [torch.load(tmp_path / f"rank{r}.pt") for r in (0, 1)]
    for r in ranks:
        for name, value in expected.items():
            torch.testing.assert_close(r["state"][name], value, atol=1e-6, rtol=1e-5)
    # reduced losses equal the single-process ones; only rank 0 logs
    for got, want in zip(ranks[0]["history"], history, strict=True):
        assert got["train_loss"] == pytest.approx(want["train_loss"], rel=1e-5)
    assert ranks[0]["logged"] == [2, 4, 6] and ranks[1]["logged"] == []

    # interrupted on 2 processes after its step-3 checkpoint, finished on 1 process
    shutil.rmtree(tmp_path / "ckpt")
    _torchrun(tmp_path, nproc=2, steps=6, stop_after="3")
    assert (tmp_path / "ckpt" / "checkpoint.pt").exists()
    model = job.make_model()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    result = train(model, opt, job.batch_fn, job.loss_fn,
                   TrainLoopConfig(steps=6, log_every=2, checkpoint_every=3,
                                   checkpoint_dir=tmp_path / "ckpt", progress=False))
    assert result.resumed_from == 3
    for name, value in expected.items():
        torch.testing.assert_close(model.state_dict()[name], value, atol=1e-6, rtol=1e-5)


@pytest.mark.slow
def test_two_gloo_processes_with_micro_batches_match_the_whole_batch(tmp_path):
    # each rank's 4 rows in 2 parts of 2 (gradients synchronised once, at the last part)
    job = _job_module(tmp_path)
    expected, history = _single(job, steps=4)
    _torchrun(tmp_path, nproc=2, steps=4, micro=2)
    for r in (0, 1):
        got = torch.load(tmp_path / f"rank{r}.pt")
        for name, value in expected.items():
            torch.testing.assert_close(got["state"][name], value, atol=1e-6, rtol=1e-5)
    for got, want in zip(torch.load(tmp_path / "rank0.pt")["history"], history, strict=True):
        assert got["train_loss"] == pytest.approx(want["train_loss"], rel=1e-5)
