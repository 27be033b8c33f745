"""End to end: ``kedro run --pipeline=steerable --env=test`` through a real KedroSession, and
bad parameters refused before any work."""

from __future__ import annotations

import json
import math
from pathlib import Path

import mlflow
import pytest
import yaml

from icml25.core.params import ParameterError, validate_parameters
from icml25.core.sweep import seed_shards
from icml25.pipelines.steerable.params import VARIANTS, VARIANTS_3D, SteerableParams

pytestmark = pytest.mark.usefixtures("one_thread")


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def test_steerable_runs_end_to_end_on_test_config(kedro_project, run_pipeline):
    run_pipeline("steerable", env="test")
    out = kedro_project / "data/08_reporting/steerable"

    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["metrics"]) == set(VARIANTS) | set(VARIANTS_3D)
    for group in (VARIANTS, VARIANTS_3D):  # identical metric names within each experiment
        names = {k for k in metrics["metrics"][group[0]] if not k.endswith("_std")}
        for variant in group:
            assert {k for k in metrics["metrics"][variant] if not k.endswith("_std")} == names
    for name in ("acc_rot_rot", "acc_up_rot", "inv_err_rot90_rot_rot", "angle_bin_spread_up_rot",
                 "inv_err_interp_max_rot_rot", "n_params", "acc_shift_rot_rot",
                 "acc_shift_up_rot"):
        for variant in VARIANTS:
            skipped = {"steer_tf_nopos": "up_rot", "cnn_aug": "rot_rot", "vit_aug": "rot_rot"}
            if name.endswith(skipped.get(variant, "-")):
                # conf/base variant_protocols: the positional ablation runs rot_rot only, the
                # augmented baselines up_rot only
                assert metrics["metrics"][variant][name] is None
                continue
            assert _finite(metrics["metrics"][variant][name]), (variant, name)
    assert len(metrics["per_seed"]["steer_tf"]["acc_rot_rot"]) == 2  # test seeds [0, 1]
    assert len(metrics["per_seed"]["steer_tf"]["acc_up_rot"]) == 1  # protocol_seeds
    assert len(metrics["per_seed"]["steer_tf_nopos"]["acc_rot_rot"]) == 1  # ablation seed
    # exact invariance of the steerable models, not of the plain ones (measured, trained)
    for variant in ("steer_tf", "steer_cnn", "steer_tf_nopos"):
        assert metrics["metrics"][variant]["inv_err_rot90_rot_rot"] < 1e-4
    assert metrics["metrics"]["vit"]["inv_err_rot90_rot_rot"] > 1e-2
    assert metrics["encoder"]["encoder:steer_tf"]["equiv_err_rot90_rot_rot"][0] < 1e-5
    # 3D: every metric measured; exact invariance on the 24 cube rotations for the steerable
    # models, none for the plain 3D CNN; interpolated rotations reported separately
    for variant in VARIANTS_3D:
        for name in ("acc_up_rot", "acc_upright_up_rot", "inv_err_cube_up_rot",
                     "inv_err_interp_max_up_rot", "n_params", "acc_shift_up_rot",
                     "acc_rot_rot", "acc_shift_rot_rot", "inv_err_cube_rot_rot"):
            assert _finite(metrics["metrics"][variant][name]), (variant, name)
        assert len(metrics["per_seed"][variant]["acc_up_rot"]) == 2
    for variant in ("steer_tf_3d", "steer_cnn_3d"):
        assert metrics["metrics"][variant]["inv_err_cube_up_rot"] < 1e-4
        assert metrics["metrics"][variant]["inv_err_interp_max_up_rot"] > 1e-4  # not exact
    assert metrics["metrics"]["cnn_3d"]["inv_err_cube_up_rot"] > 1e-2
    assert max(metrics["encoder"]["encoder:steer_tf_3d"]["equiv_err_cube_up_rot"]) < 1e-4

    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "steerable" and claims["run"]["env"] == "test"
    assert claims["n_claims"] == len(claims["claims"]) >= 20
    assert sum(c["method"].endswith("_3d") for c in claims["claims"]) >= 6
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert isinstance(claim["holds"], bool)
        assert _finite(claim["method_value"]) and _finite(claim["baseline_value"])
        if claim["baseline"] in metrics["metrics"]:
            assert claim["method_value"] == pytest.approx(
                metrics["metrics"][claim["method"]][claim["metric"]])
    exact = [c for c in claims["claims"] if c["metric"] == "inv_err_rot90_rot_rot"
             and c["method"].startswith("steer")]
    assert exact and all(c["verdict"] == "holds" for c in exact)
    # the accuracy claims pair over the test items (60 images / 32 shapes in conf/test)
    units = [c for c in claims["claims"] if c["metric"].startswith("acc_")]
    assert units and all(c["unit"] in ("test_image", "test_shape") for c in units)
    assert {c["n_pairs"] for c in units if c["unit"] == "test_image"} == {60}
    assert {c["n_pairs"] for c in units if c["unit"] == "test_shape"} == {32}
    assert "correct_0000" not in str(metrics["metrics"])  # per-item rows stay out of metrics

    assert {p.name for p in (out / "figures").iterdir()} == {
        "accuracy_by_angle.png", "invariance_by_angle.png", "accuracy_by_angle_3d.png"}
    # one folder per variant and seed shard: seed i of [0, 1] is trained by shard i % n
    models = kedro_project / "data/06_models/steerable"
    n = seed_shards()

    def _weights(variant: str) -> list[str]:
        return sorted(p.relative_to(models / variant).as_posix()
                      for p in (models / variant).rglob("*.safetensors"))

    assert _weights("steer_tf") == sorted([
        "shard_0/rot_rot_seed0.safetensors", f"shard_{1 % n}/rot_rot_seed1.safetensors",
        "shard_0/up_rot_seed0.safetensors"])  # conf/base protocol_seeds: up_rot runs seed 0 only
    assert (kedro_project / "data/01_raw/steerable/rotated_digits.npz").exists()
    assert (kedro_project / "data/01_raw/steerable/voxel_shapes.npz").exists()
    assert _weights("steer_tf_3d") == sorted([
        "shard_0/up_rot_seed0.safetensors", f"shard_{1 % n}/up_rot_seed1.safetensors",
        "shard_0/rot_rot_seed0.safetensors", f"shard_{1 % n}/rot_rot_seed1.safetensors"])

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["steerable"], output_format="list")
    parent = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parent) == 1
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    assert set(VARIANTS) | set(VARIANTS_3D) <= set(children)
    for variant in VARIANTS:  # the augmented baselines run up_rot only (variant_protocols)
        protocol = "up_rot" if variant in ("cnn_aug", "vit_aug") else "rot_rot"
        assert f"acc_{protocol}" in children[variant].data.metrics
    for variant in VARIANTS_3D:
        assert "acc_up_rot" in children[variant].data.metrics
        assert "acc_shift_rot_rot" in children[variant].data.metrics
    for variant in VARIANTS:  # the translation metric of every 2D model reaches MLflow
        assert "acc_shift_up_rot" in children[variant].data.metrics or \
            "acc_shift_rot_rot" in children[variant].data.metrics
    assert children["steer_tf_3d"].data.tags["icml25.role"] == "method"
    assert children["steer_tf"].data.tags["icml25.role"] == "method"
    assert children["cnn"].data.tags["icml25.role"] == "baseline"
    assert children["cnn_aug"].data.tags["icml25.role"] == "ablation"


def test_bad_parameter_stops_the_run_before_any_work(kedro_project, run_pipeline):
    with pytest.raises(ParameterError, match=r"steerable\.steerable\.freq_cutoff: got 0"):
        run_pipeline("steerable", env="test", params={"steerable": {"steerable": {
            "freq_cutoff": 0}}})
    assert not any((kedro_project / "data/01_raw").iterdir())


def _base_tree() -> dict:
    path = Path(__file__).resolve().parents[3] / "conf/base/parameters_steerable.yml"
    return yaml.safe_load(path.read_text())["steerable"]


@pytest.mark.parametrize(("section", "override", "message"), [
    ("steerable", {"freq_cutoff": 0}, r"steerable\.steerable\.freq_cutoff: got 0"),
    ("steerable", {"kernel_size": 4}, r"steerable\.steerable\.kernel_size: got 4"),
    ("steerable", {"nonlinearity": "fourier_relu", "n_angle": 4},
     r"n_angle 4 cannot represent band limit"),
    ("steerable", {"nonlinearity": "fourier_relu", "n_angle": 30}, r"not a multiple of 4"),
    ("steerable", {"n_radius": 3}, r"n_radius 3 rings do not fit"),
    ("transformer", {"heads": 3}, r"heads 3 does not divide"),
    ("steerable", {"pool_after": [0]}, r"final map is 14x14"),
    ("data", {"n_train": 4900}, r"exceeds the 5000 images"),
    ("evaluation", {"interp_angles_deg": [90.0]}, r"multiples of 90"),
    ("protocols", ["rot_rot", "upright"], r"steerable\.protocols\.1: got 'upright'"),
    ("variant_protocols", {"steer_tf": ["rot_rot"]}, r"only ablations may skip"),
    ("variant_protocols", {"steer_tf_nopos": ["sideways"]}, r"variant_protocols"),
    ("models3d", {"max_degree": 5}, r"steerable\.models3d\.max_degree"),
    ("models3d", {"kernel_size": 4}, r"kernel_size 4 is even"),
    ("models3d", {"n_radius": 2}, r"n_radius 2 shells do not fit"),
    ("models3d", {"widths": [4, 6], "transformer": {"layers": 1, "heads": 4}},
     r"heads 4 does not divide"),
    ("models3d", {"widths": [4, 8, 8, 8, 8]}, r"pools"),
    ("data3d", {"grid": 15}, r"steerable\.data3d\.grid: .*odd"),
    ("transformer", {"layer_scale": 0.0}, r"steerable\.transformer\.layer_scale"),
])
def test_bad_parameters_are_refused_with_the_full_key(section, override, message):
    tree = _base_tree()
    tree[section] = {**tree[section], **override} if isinstance(override, dict) else override
    with pytest.raises(ParameterError, match=message):
        validate_parameters(SteerableParams, tree, "steerable")
    validate_parameters(SteerableParams, _base_tree(), "steerable")  # the defaults are valid
