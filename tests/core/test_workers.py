"""core.workers: how many processes, the chunks, and the ordered process map."""

from __future__ import annotations

import logging
import multiprocessing

import numpy as np
import pandas as pd
import pytest

from icml25.core.workers import chunks, process_map, resolve_workers


def test_workers_are_capped_by_the_items_and_zero_means_every_core():
    assert resolve_workers(8, 3) == 3
    assert resolve_workers(1, 40) == 1
    assert resolve_workers(0, 10_000) >= 1
    assert resolve_workers(4, 100, min_items=32) == 3     # at least 32 items per process
    assert resolve_workers(4, 10, min_items=32) == 1
    assert resolve_workers(3, 0) == 1


def test_a_negative_count_is_refused_naming_its_key():
    with pytest.raises(ValueError, match=r"room\.n_jobs must be >= 0 \(0 = one per CPU core\), "
                                         r"got -1"):
        resolve_workers(-1, 10, key="room.n_jobs")


def test_a_daemonic_process_runs_the_items_itself(monkeypatch, caplog):
    monkeypatch.setitem(multiprocessing.current_process()._config, "daemon", True)
    with caplog.at_level(logging.WARNING, logger="icml25.core.workers"):
        assert resolve_workers(4, 100, key="room.n_workers") == 1
    assert "room.n_workers=4 ignored" in caplog.text
    assert resolve_workers(1, 100) == 1


def test_chunks_keep_order_and_cover_every_item():
    items = list(range(103))
    parts = chunks(items, 3)
    assert len(parts) == 24 and all(parts) and [v for p in parts for v in p] == items
    frame = pd.DataFrame({"x": range(10)})
    assert pd.concat(chunks(frame, 4, per_worker=2))["x"].tolist() == list(range(10))
    assert np.concatenate(chunks(np.arange(5), 8)).tolist() == [0, 1, 2, 3, 4]   # no empty chunk


def _offset(values: list[int], add: int) -> list[int]:
    return [v + add + _SHARED[0] for v in values]


_SHARED: list[int] = [0]


def _share(value: int) -> None:
    _SHARED[0] = value


def test_process_map_yields_in_job_order():
    # spawned processes import the function by name: a builtin here
    jobs = [(2, k) for k in range(30)]
    assert list(process_map(pow, jobs, 3)) == [2 ** k for k in range(30)]
    assert list(process_map(pow, [], 2)) == []


def test_a_forked_process_map_runs_the_initializer_in_each_process():
    jobs = [(part, 10) for part in chunks(list(range(40)), 2)]
    got = list(process_map(_offset, jobs, 2, start_method="fork", initializer=_share,
                           initargs=(1000,)))
    assert [v for part in got for v in part] == [v + 1010 for v in range(40)]
    assert _SHARED == [0]                                # the parent's copy is untouched
