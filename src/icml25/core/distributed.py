"""Data-parallel training on several processes with ``torch.distributed``.

A run started by ``torchrun --nproc_per_node=N ...`` has ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``,
``MASTER_ADDR`` and ``MASTER_PORT`` in its environment. :func:`init_distributed` reads them, joins
the process group (NCCL when every rank has a GPU, gloo otherwise) and returns a
:class:`DistContext`; without them it returns the single-process context, so the same code runs
in both settings.

Conventions (what :func:`icml25.core.training.train` relies on):

* every rank calls ``batch_fn(step)`` and gets the same *global* batch (batches are pure
  functions of the step), then keeps its shard: rows ``rank, rank + N, rank + 2N, ...``, the
  interleaved split of ``torch.utils.data.DistributedSampler`` without shuffling. With a loss
  that is a mean over rows and a global batch divisible by ``N``, DDP's gradient average equals
  the single-process gradient of the global batch, so results do not depend on ``N``.
* only rank 0 writes checkpoints, logs to MLflow and shows progress bars.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.distributed as dist

logger = logging.getLogger(__name__)

_ENV_KEYS = ("RANK", "WORLD_SIZE", "LOCAL_RANK")


@dataclass(frozen=True)
class DistContext:
    """Where this process stands in a data-parallel job."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    backend: str | None = None

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def device(self) -> torch.device:
        """This rank's device: ``cuda:<local_rank>`` under NCCL, else the CPU."""
        if self.backend == "nccl":
            return torch.device("cuda", self.local_rank)
        return torch.device("cpu")


SINGLE = DistContext()


def context_from_env(env: Mapping[str, str] | None = None) -> DistContext:
    """The context ``torchrun`` describes in ``env`` (default ``os.environ``), without joining."""
    env = os.environ if env is None else env
    if "WORLD_SIZE" not in env:
        return SINGLE
    try:
        rank, world, local = (int(env.get(k, "0")) for k in _ENV_KEYS)
    except ValueError as err:
        raise ValueError(f"torchrun environment is malformed: {err}") from err
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"torchrun environment is inconsistent: RANK={rank}, WORLD_SIZE={world}")
    return DistContext(rank=rank, world_size=world, local_rank=local)


def init_distributed(backend: str | None = None) -> DistContext:
    """Join the process group torchrun set up (idempotent); single-process when there is none.

    ``backend`` defaults to ``nccl`` when CUDA is available and ``gloo`` otherwise.
    """
    ctx = context_from_env()
    if not ctx.enabled:
        return SINGLE
    if backend is None:
        backend = "nccl" if torch.cuda.is_available() else "gloo"
    if not dist.is_initialized():
        if backend == "nccl":
            torch.cuda.set_device(ctx.local_rank)
        dist.init_process_group(backend=backend)
        logger.info("joined process group: rank %d of %d (%s)", ctx.rank, ctx.world_size, backend)
    return DistContext(ctx.rank, ctx.world_size, ctx.local_rank, dist.get_backend())


def shutdown() -> None:
    """Leave the process group if this process joined one."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def shard(batch: Any, ctx: DistContext) -> Any:
    """This rank's rows of a global batch: tensors are split along dim 0 (rows ``rank::N``);
    tuples, lists and dicts are sharded element-wise; anything else is passed through."""
    if not ctx.enabled:
        return batch
    if isinstance(batch, torch.Tensor):
        if batch.ndim == 0:
            return batch
        if batch.shape[0] % ctx.world_size:
            raise ValueError(
                f"global batch of {batch.shape[0]} rows does not split evenly over "
                f"{ctx.world_size} processes; choose a batch size divisible by the world size"
            )
        return batch[ctx.rank :: ctx.world_size]
    if isinstance(batch, Mapping):
        return {k: shard(v, ctx) for k, v in batch.items()}
    if type(batch) in (tuple, list):
        return type(batch)(shard(v, ctx) for v in batch)
    return batch


def all_reduce_mean(value: float, ctx: DistContext) -> float:
    """Mean of a Python number over ranks (identity in a single process)."""
    if not ctx.enabled:
        return float(value)
    device = ctx.device()
    t = torch.tensor([float(value)], dtype=torch.float64, device=device)
    dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return float(t.item()) / ctx.world_size


def broadcast_flag(flag: bool, ctx: DistContext) -> bool:
    """Rank 0's boolean on every rank (so that all ranks take the same branch)."""
    if not ctx.enabled:
        return bool(flag)
    t = torch.tensor([1 if flag else 0], dtype=torch.int32, device=ctx.device())
    dist.broadcast(t, src=0)
    return bool(t.item())


def barrier(ctx: DistContext) -> None:
    if ctx.enabled:
        dist.barrier()


class LossModule(torch.nn.Module):
    """``forward(batch) = loss_fn(model, batch)``, so DistributedDataParallel sees the whole loss
    computation as one forward call (DDP synchronises gradients only for work done inside its
    own ``forward``; a model whose loss lives in another method would otherwise skip the sync)."""

    def __init__(self, model: torch.nn.Module, loss_fn) -> None:
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, batch: Any) -> torch.Tensor:
        return self.loss_fn(self.model, batch)
