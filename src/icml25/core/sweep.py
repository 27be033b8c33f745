"""Seed sweeps as node fan-out: a pipeline's seeds split over a fixed number of shard nodes.

Kedro builds a pipeline's graph before it reads any parameter, so the graph cannot have one node
per seed of a list that the configuration (or ``--params``) chooses at run time. Instead a room
that fans out its seeds builds ``n`` shard nodes per variant (namespaces
``<pipeline>.<variant>.shard_<k>``) and shard ``k`` trains ``seeds[k::n]``: every seed list
works, each seed lands in exactly one shard, and with ``len(seeds) <= n`` every seed is its own
node, which a parallel runner (``icml25.runners.DaskRunner``, Kedro's ``ParallelRunner``) spreads
over its workers. A shard with no seed (more shards than seeds) writes an empty output and costs
nothing.

``n`` comes from the environment variable ``ICML25_SEED_SHARDS`` (default 3, the number of seeds
every default configuration runs), read when the pipelines are registered.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import pandas as pd

SHARDS_ENV = "ICML25_SEED_SHARDS"
DEFAULT_SHARDS = 3
MAX_SHARDS = 64
T = TypeVar("T")


def seed_shards(environ: dict[str, str] | None = None) -> int:
    """The number of seed shards per variant: ``$ICML25_SEED_SHARDS`` or 3."""
    raw = (os.environ if environ is None else environ).get(SHARDS_ENV, "").strip()
    if not raw:
        return DEFAULT_SHARDS
    try:
        n = int(raw)
    except ValueError:
        raise ValueError(f"{SHARDS_ENV} must be an integer, got {raw!r}") from None
    if not 1 <= n <= MAX_SHARDS:
        raise ValueError(f"{SHARDS_ENV} must be in 1..{MAX_SHARDS}, got {n}")
    return n


def shard_seeds(seeds: Sequence[int], shard: int, n_shards: int) -> list[int]:
    """The seeds shard ``shard`` of ``n_shards`` runs: ``seeds[shard::n_shards]``."""
    if n_shards < 1 or not 0 <= shard < n_shards:
        raise ValueError(f"shard {shard} of {n_shards} does not exist")
    return list(seeds)[shard::n_shards]


def interleave_shards(shards: Sequence[Sequence[T]]) -> list[T]:
    """Put per-seed results from ``n`` shards back in seed-list order (inverse of
    :func:`shard_seeds`).

    Shard ``k`` holds the results of ``seeds[k::n]``, so merged item ``i`` is item ``i // n``
    of shard ``i % n``. Shard lengths that no seed list can produce (a later shard longer than an
    earlier one, or two shards differing by more than one) raise instead of reordering silently.
    """
    n = len(shards)
    if n == 0:
        raise ValueError("interleave_shards: no shards given")
    lengths = [len(s) for s in shards]
    total = sum(lengths)
    expected = [len(range(k, total, n)) for k in range(n)]
    if lengths != expected:
        raise ValueError(f"interleave_shards: shard lengths {lengths} do not split a seed list of "
                         f"{total} as seeds[k::{n}] would ({expected})")
    return [shards[i % n][i // n] for i in range(total)]


def interleave_frames(frames: Sequence[pd.DataFrame | None], seeds: Sequence[int] | None, *,
                      where: str, seeds_from: str = "the parameters",
                      key: str = "seed") -> list[pd.DataFrame]:
    """Per-seed row groups of the seed shards' tables, back in seed-list order.

    ``frames[k]`` is shard ``k``'s table (``None`` or empty: a shard without rows); the rows of
    one seed (same ``key``) form one group, in the order the shard wrote them. Within a shard
    the groups are first put in seed-list order (a shard may write its seeds in another order,
    by model key for instance), then :func:`interleave_shards` merges the shards.

    With ``seeds`` given, a seed that the list does not hold and a merged order other than
    ``seeds`` raise; ``seeds=None`` keeps each shard's own order and checks only that the shard
    sizes fit a seed list. ``where`` starts every error message (``"acorn: the acorn_phase seed
    shards"``), ``seeds_from`` names the seed list's origin (``"params:acorn.seeds"``).
    """
    position = None if seeds is None else {int(s): i for i, s in enumerate(seeds)}
    per_shard: list[list[pd.DataFrame]] = []
    for frame in frames:
        if frame is None or len(frame) == 0:
            per_shard.append([])
            continue
        if key not in frame.columns:
            raise ValueError(f"{where}: a shard's table has no {key!r} column; re-run the seed "
                             f"shards")
        groups = [group for _, group in frame.groupby(key, sort=False)]
        if position is not None:
            unknown = sorted({int(g[key].iloc[0]) for g in groups} - set(position))
            if unknown:
                raise ValueError(f"{where} hold seeds {unknown} that {seeds_from} does not "
                                 f"list; re-run the seed shards")
            groups.sort(key=lambda g: position[int(g[key].iloc[0])])
        per_shard.append(groups)
    merged = interleave_shards(per_shard)
    if seeds is not None:
        found = [int(g[key].iloc[0]) for g in merged]
        if found != [int(s) for s in seeds]:
            raise ValueError(f"{where} hold seeds {found}, {seeds_from} is {list(seeds)}; re-run "
                             f"the seed shards")
    return merged
