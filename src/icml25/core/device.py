"""Device selection and seeding: one place that decides where and how reproducibly we compute."""

from __future__ import annotations

import logging
import os
import random

import numpy as np
import torch

logger = logging.getLogger(__name__)

_DEVICE_CHOICES = ("auto", "cpu", "cuda", "mps")


def resolve_device(name: str = "auto") -> torch.device:
    """Map a configured device name to a ``torch.device``.

    ``auto`` picks CUDA, then Apple's MPS, then the CPU. Asking explicitly for an accelerator that
    is not present is an error rather than a silent fallback, so a paper-scale config never runs on
    the CPU by accident.
    """
    base = name.split(":", 1)[0]
    if base not in _DEVICE_CHOICES:
        raise ValueError(f"device: got {name!r}; expected one of {', '.join(_DEVICE_CHOICES)}")
    if base == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if base == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device: {name!r} requested but torch sees no CUDA device")
    if base == "mps" and not torch.backends.mps.is_available():
        raise RuntimeError(f"device: {name!r} requested but torch sees no MPS device")
    return torch.device(name)


def seed_everything(seed: int) -> np.random.Generator:
    """Seed Python, NumPy and torch (all devices) and return a NumPy generator for the caller.

    CPU runs with the same seed are bit-for-bit identical; on CUDA, cuDNN autotuning is switched
    off so results vary only by the nondeterminism of the kernels themselves.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ValueError(f"seed: got {seed!r}; expected a non-negative integer")
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
        torch.backends.cudnn.benchmark = False
    os.environ.setdefault("PYTHONHASHSEED", str(seed))
    return np.random.default_rng(seed)


def set_threads(n_threads: int | None) -> int:
    """Set torch's intra-op thread count (``None`` or 0 keeps torch's default); return it.

    Small models on few cores are often fastest on one thread, so this is a parameter of every
    pipeline that trains a network rather than a global choice.
    """
    if n_threads:
        if n_threads < 0:
            raise ValueError(f"num_threads: got {n_threads}; expected a positive integer or 0")
        cap = thread_cap()
        if cap is not None and n_threads > cap:
            logger.info("num_threads=%d capped at OMP_NUM_THREADS=%d", n_threads, cap)
            n_threads = cap
        torch.set_num_threads(int(n_threads))
    return torch.get_num_threads()


def thread_cap(environ: dict[str, str] | None = None) -> int | None:
    """The process's thread budget, ``$OMP_NUM_THREADS`` (``None`` when unset or not a positive
    integer); :func:`set_threads` never goes above it.

    A Dask worker starts with ``OMP_NUM_THREADS=1`` (distributed's ``nanny.pre-spawn-environ``)
    so that workers sharing a machine do not oversubscribe its cores. A node asking torch for 2
    threads there put 4 spinning OpenMP threads on 2 cores: wavetoken's training step went from
    0.13 s to about 3 s on a 2-worker LocalCluster of this 2-core machine.
    """
    raw = (os.environ if environ is None else environ).get("OMP_NUM_THREADS", "").strip()
    try:
        n = int(raw)
    except ValueError:
        return None
    return n if n >= 1 else None
