"""Worker processes for independent items: how many, and an ordered map over them.

Used where each item's result depends on the item alone (its own seed, its own rows), so the
output is the same for any number of processes: KernelSynth series, acorn clips, sortformer
features, robust_rl's tabular cells, sgd_hitting's Monte-Carlo runs.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from itertools import pairwise
from typing import Any

import numpy as np

logger = logging.getLogger(__name__)


def resolve_workers(n_jobs: int, n_items: int, *, min_items: int = 1,
                    key: str = "n_jobs") -> int:
    """Processes for ``n_items`` independent items: ``n_jobs`` (``0``: one per CPU core), at
    most one per ``min_items`` items and at least one; one inside a daemonic process (a Dask
    worker, say), which may not start children (logged, naming the parameter ``key``)."""
    if n_jobs < 0:
        raise ValueError(f"{key} must be >= 0 (0 = one per CPU core), got {n_jobs}")
    workers = (os.cpu_count() or 1) if n_jobs == 0 else n_jobs
    workers = max(1, min(workers, n_items // min_items))
    if workers > 1 and multiprocessing.current_process().daemon:
        logger.warning("%s=%d ignored: this node runs in a daemonic process (a Dask worker?), "
                       "which cannot start worker processes; running here instead", key, n_jobs)
        return 1
    return workers


def chunks(items: Sequence[Any], workers: int, per_worker: int = 8) -> list[Any]:
    """``items`` cut, in order, into about ``per_worker`` contiguous chunks per worker (slices
    of a list, array or data frame; no empty chunk), so that uneven items balance out."""
    take = items.iloc if hasattr(items, "iloc") else items
    bounds = np.linspace(0, len(items), workers * per_worker + 1).astype(int)
    return [take[a:b] for a, b in pairwise(bounds) if b > a]


def process_map(func: Callable[..., Any], jobs: Sequence[tuple], workers: int, *,
                start_method: str = "spawn", initializer: Callable[..., None] | None = None,
                initargs: tuple = ()) -> Iterator[Any]:
    """``func(*job)`` for every job, yielded in job order, computed by ``workers`` processes.

    ``spawn`` (the default) never forks a process that holds torch's threads; ``fork`` shares
    the parent's memory where the jobs carry large arguments. ``initializer(*initargs)`` runs
    once per process (to send a large shared input once rather than with every job)."""
    if not jobs:
        return
    context = multiprocessing.get_context(start_method)
    with ProcessPoolExecutor(max_workers=workers, mp_context=context, initializer=initializer,
                             initargs=initargs) as pool:
        yield from pool.map(func, *zip(*jobs, strict=True))
