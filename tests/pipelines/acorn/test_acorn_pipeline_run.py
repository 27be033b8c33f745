"""End to end: `kedro run --pipeline=acorn --env=test` through a real KedroSession."""

from __future__ import annotations

import json
import math

import mlflow
import pytest

from icml25.core.params import ParameterError
from icml25.core.sweep import seed_shards

pytestmark = pytest.mark.usefixtures("one_thread")


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def test_acorn_runs_end_to_end_on_test_config(kedro_project, run_pipeline):
    run_pipeline("acorn", env="test")
    out = kedro_project / "data/08_reporting/acorn"
    metrics = json.loads((out / "metrics.json").read_text())
    variants = set(metrics["metrics"])
    assert variants == {"acorn_phase", "magnitude_only", "classical_dsp", "prior", "random",
                        "best_trivial"}
    names = {k for k in metrics["metrics"]["acorn_phase"] if not k.endswith("_std")}
    assert {"los_bca", "multipath_tca", "doppler_mae_f", "doa_mae_t", "range_rep",
            "t2_doa_mae_t", "ood_los_bca"} <= names
    # the symmetry metrics on the held-out test items, for every variant
    assert {"doa_swap_error", "doa_swap_side_flip", "doa_reverse_error", "doa_delay_change",
            "doa_channel_delay_error", "doppler_reverse_change", "doppler_mirror_sign_flip",
            "doppler_mirror_error", "doppler_unknown_source_mae_f"} <= names
    for variant in ("acorn_phase", "magnitude_only"):  # antisymmetric DoA head, built in
        assert metrics["metrics"][variant]["doa_swap_error"] < 1e-4
        assert metrics["metrics"][variant]["doa_swap_side_flip"] == 1.0
    assert metrics["metrics"]["prior"]["doa_delay_change"] == 0.0  # a constant does not move
    for variant in variants:
        got = {k for k in metrics["metrics"][variant] if not k.endswith("_std")}
        assert got == names, variant
        assert all(_finite(metrics["metrics"][variant][k]) for k in names), variant
    assert len(metrics["per_seed"]["acorn_phase"]["doa_mae_t"]) == 2  # test seeds [0, 1]
    # the matched filter on a clean FMCW echo is nearly exact; GCC-PHAT is far from the mean
    assert metrics["metrics"]["classical_dsp"]["range_rep"] < 2.0
    assert metrics["metrics"]["classical_dsp"]["doa_mae_t"] < metrics["metrics"]["prior"][
        "doa_mae_t"]

    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "acorn" and claims["run"]["env"] == "test"
    assert claims["n_claims"] == len(claims["claims"]) >= 15
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert claim["holds"] == (claim["verdict"] == "holds")
        assert _finite(claim["method_value"]) and _finite(claim["baseline_value"])
        if claim["unit"] == "item":
            # the items' terms average back to the paper metric of every seed
            metric = claim["metric"].removeprefix("items_")
            assert claim["n_pairs"] == 6 and claim["n_seeds"] == 2  # 6 test items per task
            for side in ("method", "baseline"):
                assert claim[f"{side}_value"] == pytest.approx(
                    metrics["metrics"][claim[side]][metric])
        elif claim["method"] in metrics["metrics"] and claim["baseline"] in metrics["metrics"]:
            assert claim["method_value"] == pytest.approx(
                metrics["metrics"][claim["method"]][claim["metric"]])
    # a deterministic baseline (scored once) repeats its item terms on every seed
    dsp_items = metrics["per_unit"]["classical_dsp"]["items_doa_mae_t"]
    assert all(len(v) == 2 and v[0] == v[1] for v in dsp_items.values())
    ratio = next(c for c in claims["claims"] if c["method"].startswith("ratio:"))
    assert ratio["method_value"] == pytest.approx(
        sum(a / b for a, b in zip(metrics["per_seed"]["acorn_phase"]["doa_mae_t"],
                                  metrics["per_seed"]["magnitude_only"]["doa_mae_t"],
                                  strict=True)) / 2)

    assert {p.name for p in (out / "figures").iterdir()} == {"examples.png",
                                                             "error_vs_condition.png"}
    models = kedro_project / "data/06_models/acorn"
    n = seed_shards()  # seed i of [0, 1] is trained by shard i % n of each variant
    for variant in ("acorn_phase", "magnitude_only"):
        assert sorted(p.relative_to(models / variant).as_posix()
                      for p in (models / variant).rglob("*.safetensors")) == [
            f"shard_{i % n}/seed_{i}.safetensors" for i in (0, 1)]
        assert {p.name for p in (models / variant).iterdir()} <= {
            f"shard_{k}" for k in range(n)}
    raw = kedro_project / "data/01_raw/acorn"
    assert {"speech_bank.npz", "source_bank.npz", "aqa_phy_meta.parquet"} <= {
        p.name for p in raw.iterdir()}

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["acorn"], output_format="list")
    parent = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parent) == 1
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    for variant in variants:
        assert "doa_mae_t" in children[variant].data.metrics, variant
    assert children["acorn_phase"].data.tags["icml25.role"] == "method"
    assert children["magnitude_only"].data.tags["icml25.role"] == "baseline"


@pytest.mark.parametrize(("override", "message"), [
    ({"data": {"speed": [-400.0, 40.0]}}, r"acorn\.data\.speed: .*speed of sound"),
    ({"data": {"mic_spacing": 6.0}}, r"acorn\.data: .*wider than the narrowest room"),
    ({"model": {"d": 30, "heads": 4}}, r"acorn\.model: .*not divisible"),
])
def test_bad_parameters_stop_before_any_work(kedro_project, run_pipeline, override, message):
    with pytest.raises(ParameterError, match=message):
        run_pipeline("acorn", env="test", params={"acorn": override})
    assert not any((kedro_project / "data/01_raw").iterdir())


def test_paper_code_path_runs_on_cpu_at_tiny_size(kedro_project, run_pipeline):
    """conf/paper's choices (channel tokens, no thread pinning) on the test sizes, one seed,
    without the optional T2 and OOD splits."""
    run_pipeline("acorn", env="test", params={"acorn": {
        "seeds": [0], "num_threads": 0,
        "model": {"mc_mode": "tokens"}, "data": {"n_t2": 0, "n_ood": 0}}})
    metrics = json.loads((kedro_project / "data/08_reporting/acorn/metrics.json").read_text())
    names = set(metrics["metrics"]["acorn_phase"])
    assert "doa_mae_t" in names and not any(n.startswith(("t2_", "ood_")) for n in names)
    assert all(_finite(v) for v in metrics["metrics"]["acorn_phase"].values())
