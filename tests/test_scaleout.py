"""Scale-out: a paper pipeline on a 2-worker Dask LocalCluster, and under torchrun with two
data-parallel gloo processes, gives the sequential run's metrics; the rooms that fan out their
seeds build one training node per variant and seed shard."""

from __future__ import annotations

import importlib
import json
import os
import re
import subprocess
import sys
from functools import partial
from pathlib import Path

import mlflow
import pytest
from kedro.framework.session import KedroSession
from kedro.framework.startup import bootstrap_project

from icml25.core.sweep import SHARDS_ENV
from icml25.runners import DaskRunner
from icml25.runners.dask import configure


def _run(project, runner=None, pipeline: str = "wavetoken") -> dict:
    bootstrap_project(project)
    with KedroSession.create(project_path=project, env="test") as session:
        session.run(pipeline_names=[pipeline], runner=runner)
    return json.loads((project / f"data/08_reporting/{pipeline}/metrics.json").read_text())


def _torchrun(project: Path) -> dict:
    torchrun = Path(sys.executable).with_name("torchrun")
    proc = subprocess.run(
        [str(torchrun), "--standalone", "--nproc_per_node=2", "-m", "kedro", "run",
         "--pipeline=wavetoken", "--env=test"],
        cwd=project, env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "joined process group: rank 1 of 2" in proc.stdout + proc.stderr
    return json.loads((project / "data/08_reporting/wavetoken/metrics.json").read_text())


def _close(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for variant in b:
        for name, value in b[variant].items():
            assert a[variant][name] == pytest.approx(value, rel=1e-6, abs=1e-9), (variant, name)


@pytest.mark.slow
def test_wavetoken_on_dask_and_under_torchrun_matches_sequential(kedro_project, monkeypatch):
    # a Dask worker runs torch on OMP_NUM_THREADS=1 threads (core.device.thread_cap); the
    # sequential run gets the same budget, since other thread counts may change the last bits
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    sequential = _run(kedro_project)
    dask = _run(kedro_project, DaskRunner(n_workers=2, threads_per_worker=1))
    assert dask["metrics"] == sequential["metrics"]
    assert dask["per_seed"] == sequential["per_seed"]

    # two data-parallel processes: DDP's averaged gradients may differ from the single-process
    # ones in the last float bits, hence the tolerance
    _close(_torchrun(kedro_project)["metrics"], sequential["metrics"])

    # the variants' runs a worker opened are children of the Dask run's parent, as sequentially
    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["wavetoken"], output_format="list")
    parents = sorted((r for r in runs if "mlflow.parentRunId" not in r.data.tags),
                     key=lambda r: r.info.start_time)
    assert len(parents) == 3  # sequential, Dask, torchrun (rank 0 only)
    for parent in parents:
        children = {r.info.run_name for r in runs
                    if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id}
        assert {"wavetoken", "chronos_bins_1024"} <= children
    assert parents[1].info.status == "FINISHED"


def test_cluster_settings_come_from_arguments_then_conf_then_defaults():
    configure({"n_workers": 3})
    try:
        assert DaskRunner().settings()["n_workers"] == 3
        assert DaskRunner(n_workers=1).settings()["n_workers"] == 1
        assert DaskRunner().settings()["address"] is None
        with pytest.raises(ValueError, match=r"dask\.threads_per_worker: got 0"):
            DaskRunner(threads_per_worker=0).settings()
        with pytest.raises(ValueError, match="unknown keys"):
            configure({"workers": 2})
    finally:
        configure(None)


def test_local_cluster_workers_keep_glibc_adaptive_malloc_and_one_thread(caplog):
    # Dask's nanny sets MALLOC_TRIM_THRESHOLD_=65536, which halves torch's speed on a worker
    # (icml25.runners.dask.MALLOC_TRIM); the runner's LocalCluster must leave it unset and keep
    # the one-thread budget
    from icml25.runners.dask import MALLOC_TRIM

    runner = DaskRunner(n_workers=1)
    client, cluster = runner._connect()
    try:
        env = next(iter(client.run(lambda: dict(os.environ)).values()))
        assert MALLOC_TRIM not in env
        assert env["OMP_NUM_THREADS"] == "1"
        with caplog.at_level("WARNING"):
            runner._check_worker_malloc(client)
        assert MALLOC_TRIM not in caplog.text
        # a worker started elsewhere with the variable set is named in a warning
        client.run(lambda: os.environ.update({MALLOC_TRIM: "65536"}))
        with caplog.at_level("WARNING"):
            runner._check_worker_malloc(client)
        assert f"1 Dask worker(s) run with {MALLOC_TRIM} set (65536)" in caplog.text
    finally:
        client.close()
        cluster.close()


# ------------------------------------------------------------------------- seed fan-out
def _variants(room: str) -> list[str]:
    """The names a room fans its seeds out under (``<room>.<name>.shard_<k>``)."""
    if room == "ctbench":
        from icml25.pipelines.ctbench.params import METHODS, SETTINGS
        return ["standard", *(f"{s}.{m}" for s in SETTINGS for m in METHODS if m != "standard")]
    if room == "softshape":  # the ablations and baselines are chosen by parameters
        return ["softshape", "ablations", "baselines"]
    if room == "frugal":
        from icml25.pipelines.frugal.params import VARIANTS
        return list(VARIANTS)
    if room == "vga":
        from icml25.pipelines.vga.params import MODELS
        return list(MODELS)
    if room == "knowledge_swap":
        from icml25.pipelines.knowledge_swap.params import SWAP_VARIANTS
        return ["pretrained", "retrain_oracle", *SWAP_VARIANTS]
    if room == "sortformer":  # the diarizers per loss, then the ASR study on the hybrid ones
        from icml25.pipelines.sortformer.params import VARIANTS
        return [*VARIANTS, "msasr"]
    if room == "functional_tom":  # every game's meta-trained transformers
        return ["meta"]
    if room == "fpo":
        from icml25.pipelines.fpo.losses import METHODS
        return list(METHODS)
    if room == "ex2psro":  # the methods are chosen by parameters
        return ["psro"]
    if room == "sparse_iht":  # each experiment's seed loop
        from icml25.pipelines.sparse_iht.pipeline import EXPERIMENTS
        return list(EXPERIMENTS)
    if room == "sgd_hitting":  # the Monte-Carlo experiments are chosen by parameters
        return ["mc"]
    if room == "distributed_estimation":  # the sweeps are chosen by parameters
        return ["sim"]
    if room == "robust_rl":  # the DQN variants (the tabular and linear studies are cheap)
        from icml25.pipelines.robust_rl.nodes import DQN_VARIANTS
        return list(DQN_VARIANTS)
    if room == "quantum_rl":  # the agents are chosen by parameters
        return ["agents"]
    if room == "acorn":
        from icml25.pipelines.acorn.params import VARIANTS
        return list(VARIANTS)
    if room == "malot":  # the prover variants, and the LoT-Solver trained and run per shard
        return ["prover", "lot"]
    if room == "steerable":  # the 2D and the 3D variants (protocols loop inside a shard)
        from icml25.pipelines.steerable.params import VARIANTS, VARIANTS_3D
        return [*VARIANTS, *VARIANTS_3D]
    if room == "twa":  # the selected methods are rerun per seed inside a shard
        return ["methods"]
    # the tokenizer variants, then the group that trains the ablations the conf selects
    from icml25.pipelines.wavetoken.params import ABLATIONS, VARIANTS
    return [*VARIANTS, ABLATIONS]


def _trained_once(room: str) -> set[str]:
    """Training nodes that are no seed sweep, so sit outside the seed shards: fpo trains its SFT
    model and SAE once (on ``data_seed``) for every method and seed, and picks each method's
    learning rate on dev with the first seed (``fpo.<method>.select_lr``) before that method's
    seed shards all train at it; twa trains its systems once and tunes every method's grid with
    the first seed (``twa.select_methods``) before the seed shards rerun the selected ones;
    sparse_iht fits its index-tracking portfolios on real prices once (no seed enters them)."""
    if room == "fpo":
        from icml25.pipelines.fpo.losses import METHODS
        return {"fpo.train_sft", "fpo.train_sae", *(f"fpo.{m}.select_lr" for m in METHODS)}
    if room == "twa":  # the base/other systems, and every method's grid on the first seed
        return {"twa.train_systems", "twa.select_methods"}
    if room == "sparse_iht":  # index tracking on real prices: one deterministic fit per index
        return {"sparse_iht.run_index_real"}
    return set()


def _bound(func) -> dict:
    """The keywords a node function was bound with (``partial``), empty for a plain function."""
    return dict(func.keywords) if isinstance(func, partial) else {}


FANNED_OUT = ["wavetoken", "frugal", "vga", "knowledge_swap", "softshape", "ctbench",
              "sortformer", "functional_tom", "fpo", "ex2psro", "sparse_iht", "sgd_hitting",
              "distributed_estimation", "robust_rl", "quantum_rl",
              "acorn", "malot", "steerable", "twa"]


@pytest.mark.parametrize("room", FANNED_OUT)
@pytest.mark.parametrize("n_shards", [1, 2, 3, 5])
def test_seed_sweeps_are_one_training_node_per_variant_and_shard(room, n_shards, monkeypatch):
    monkeypatch.setenv(SHARDS_ENV, str(n_shards))
    pipeline = importlib.import_module(f"icml25.pipelines.{room}.pipeline").create_pipeline()
    shard_ns = re.compile(rf"^{room}\.(?P<variant>[\w.]+?)\.shard_(?P<k>\d+)$")
    shard_of = re.compile(rf"^{room}\.(?P<variant>[\w.]+?)\.shard_(?P<k>\d+)\.")

    once = _trained_once(room)
    found: dict[str, list[int]] = {}
    for n in pipeline.nodes:
        match = shard_ns.match(n.namespace or "")
        if "training" in n.tags and n.name not in once:
            assert match, f"{room}: training node {n.name} is not in a seed-shard namespace"
        if not match:
            continue
        variant, k = match["variant"], int(match["k"])
        # a node of shard k reads no other shard's data ...
        for name in n.inputs:
            other = shard_of.match(name)
            assert other is None or int(other["k"]) == k, (n.name, name)
        if "training" in n.tags:
            # ... and trains shard k of n_shards, i.e. seeds[k::n_shards], and nothing else
            bound = _bound(n.func)
            assert (bound.get("shard"), bound.get("n_shards")) == (k, n_shards), n.name
            found.setdefault(variant, []).append(k)
    assert sorted(found) == sorted(_variants(room))
    for variant, shards in found.items():
        assert sorted(shards) == list(range(n_shards)), (room, variant)

    # a training node outside the shards is one that exists and trains; one in a variant's
    # namespace (a selection ahead of the variant's seeds) feeds every shard of that variant
    by_name = {n.name: n for n in pipeline.nodes}
    for name in once:
        assert "training" in by_name[name].tags, name
        variant = by_name[name].namespace.removeprefix(f"{room}.")
        if variant in found:
            readers = [n for n in pipeline.nodes if "training" in n.tags
                       and (m := shard_ns.match(n.namespace or "")) and m["variant"] == variant]
            assert len(readers) == n_shards, name
            for reader in readers:
                assert set(by_name[name].outputs) & set(reader.inputs), (name, reader.name)

    # every shard output the rest of the pipeline uses is merged by some node that reads that
    # output of every shard (a node may still read one shard only, e.g. a first-seed figure)
    merged: dict[tuple[str, str], bool] = {}
    for n in pipeline.nodes:
        if shard_ns.match(n.namespace or ""):
            continue
        read: dict[tuple[str, str], set[int]] = {}
        for name in n.inputs:
            if m := shard_of.match(name):
                read.setdefault((m["variant"], name[m.end():]), set()).add(int(m["k"]))
        for key, shards in read.items():
            merged[key] = merged.get(key, False) or shards == set(range(n_shards))
    assert merged, f"{room}: no node reads the seed shards' outputs"
    assert all(merged.values()), [key for key, ok in merged.items() if not ok]


#: frugal's wall-clock measurements, the only metrics that differ from run to run
TIMINGS = {"optimizer_step_ms", "train_step_ms", "train_seconds"}


def _without_timings(metrics: dict) -> dict:
    return {v: {m: x for m, x in values.items() if m.removesuffix("_std") not in TIMINGS}
            for v, values in metrics.items()}


@pytest.mark.slow
def test_frugal_seed_shards_on_dask_match_sequential(kedro_project, monkeypatch):
    monkeypatch.setenv(SHARDS_ENV, "2")  # conf/test's seeds [0, 1]: one seed per shard node
    sequential = _run(kedro_project, pipeline="frugal")
    dask = _run(kedro_project, DaskRunner(n_workers=2, threads_per_worker=1), "frugal")
    assert set(sequential["metrics"]["adamw"]) >= TIMINGS
    assert _without_timings(dask["metrics"]) == _without_timings(sequential["metrics"])
    assert _without_timings(dask["per_seed"]) == _without_timings(sequential["per_seed"])
    assert dask["curves"] == sequential["curves"]
