"""End to end: `kedro run --pipeline=ex2psro --env=test` through a real KedroSession."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import yaml

from icml25.core.datasets import ArrayTreeDataset
from icml25.core.params import ParameterError, validate_parameters
from icml25.core.sweep import seed_shards
from icml25.pipelines.ex2psro.params import Ex2psroParams

PROJECT = Path(__file__).resolve().parents[3]

pytestmark = pytest.mark.usefixtures("one_thread")


def test_ex2psro_runs_end_to_end_on_test_config(kedro_project, run_pipeline):
    run_pipeline("ex2psro", env="test")
    out = kedro_project / "data/08_reporting/ex2psro"
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["metrics"]) == {"ex2psro", "vanilla", "random"}
    for variant in ("ex2psro", "vanilla"):
        assert len(metrics["per_seed"][variant]["final_welfare"]) == 2  # test seeds [0, 1]
        for name in ("final_welfare", "final_regret", "final_welfare_combined"):
            assert math.isfinite(metrics["metrics"][variant][name])
        assert metrics["metrics"][variant]["final_regret"] >= 0
    # the stag hunt variant runs beside bargaining; every method simulates the same episodes
    per_seed = metrics["per_seed"]
    for prefix in ("", "staghunt_"):
        for variant in ("ex2psro", "vanilla"):
            for name in ("final_regret", "final_own_regret", "final_welfare"):
                assert all(math.isfinite(v) for v in per_seed[variant][prefix + name])
            assert all(v >= 0 for v in per_seed[variant][prefix + "final_own_regret"])
        for key in ("final_episodes_total", "final_episodes_oracle", "final_episodes_estimation"):
            assert per_seed["ex2psro"][prefix + key] == per_seed["vanilla"][prefix + key]
        assert all(v > 0 for v in per_seed["ex2psro"][prefix + "final_episodes_oracle"])
    assert per_seed["ex2psro"]["staghunt_final_episodes_oracle"] == [2 * 40] * 2
    curves = [c for c in metrics["curves"] if c["game"] == "bargaining"]
    assert {(c["method"], c["iteration"]) for c in curves} == {
        (m, k) for m in ("ex2psro", "vanilla") for k in range(3)}
    assert {c["game"] for c in metrics["curves"]} == {"bargaining", "staghunt"}
    assert (out / "figures" / "staghunt_welfare_regret.png").exists()
    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "ex2psro" and claims["n_claims"] == 6
    assert {c["metric"] for c in claims["claims"]} >= {"staghunt_final_welfare",
                                                        "staghunt_final_regret"}
    assert claims["confidence"] == 0.90
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert claim["holds"] is (claim["verdict"] == "holds")
        assert claim["n_pairs"] == 2  # paired by seed: test seeds [0, 1]
        assert claim["method_value"] == pytest.approx(
            metrics["metrics"][claim["method"]][claim["metric"]])
    # random's welfare is per seed (iteration 0 of that seed's runs), paired with the methods'
    assert len(metrics["per_seed"]["random"]["final_welfare"]) == 2
    start = {(c["method"], c["iteration"]): c["welfare_mean"] for c in curves}
    assert metrics["metrics"]["random"]["final_welfare"] == pytest.approx(
        start[("ex2psro", 0)]) == pytest.approx(start[("vanilla", 0)])
    assert (out / "figures" / "welfare_regret.png").exists()
    assert (kedro_project / "data/01_raw/ex2psro/bargaining_instances.txt").read_text().count(
        "\n") == 20
    # one .npz array tree per seed shard: seed i of [0, 1] is run (for every method) by shard i % n
    n = seed_shards()
    outputs = kedro_project / "data/07_model_output/ex2psro"
    for k in range(n):
        runs = ArrayTreeDataset(str(outputs / f"psro_runs_shard_{k}.npz")).load()
        assert [(r["name"], r["seed"]) for r in runs] == [
            (m, i) for _game in ("main", "staghunt") for m in ("ex2psro", "vanilla")
            for i in (0, 1) if i % n == k]


def test_ex2psro_unknown_game_fails_before_any_work(kedro_project, run_pipeline):
    with pytest.raises(ParameterError, match=r"ex2psro\.game\.name"):
        run_pipeline("ex2psro", env="test", params={"ex2psro": {"game": {"name": "chess"}}})
    assert not (kedro_project / "data/01_raw/ex2psro").exists()


def _base_params() -> dict:
    return yaml.safe_load((PROJECT / "conf/base/parameters_ex2psro.yml").read_text())["ex2psro"]


@pytest.mark.parametrize(("path", "value", "key"), [
    (("oracle", "steps"), 0, "ex2psro.oracle.steps"),
    (("methods", "ex2psro", "explore"), "magic", "ex2psro.methods.ex2psro.explore"),
    (("game", "discount"), 1.5, "ex2psro.game.discount"),
    (("seeds",), [1, 1], "ex2psro.seeds"),
    (("oracle", "episodes"), 0, "ex2psro.oracle.episodes"),
    (("psro", "rrd", "scale"), "relative", "ex2psro.psro.rrd.scale"),
    (("variants", "staghunt", "bogus"), 1, "ex2psro.variants"),
    (("methods", "random"), {"role": "baseline", "explore": "none"}, "ex2psro.methods"),
])
def test_ex2psro_bad_parameters_name_their_key(path, value, key, assert_refused):
    assert_refused(Ex2psroParams, _base_params(), "ex2psro", path, value, key.replace(".", r"\."))
    validate_parameters(Ex2psroParams, _base_params(), "ex2psro")  # the defaults are valid


def test_ex2psro_instance_file_parameter(tmp_path):
    from icml25.pipelines.ex2psro.nodes import make_instances

    params = _base_params()
    good = tmp_path / "good.txt"
    good.write_text("1,2,3 8,1,0 4,0,2\n1,2,3 4,0,2 8,1,0\n")
    params["game"]["instances_file"] = str(good)
    assert make_instances(params) == good.read_text()
    bad = tmp_path / "bad.txt"
    bad.write_text("1,2,3 8,1,0 4,0,2\n1,2,3 4,0,nan 8,1,0\n")
    params["game"]["instances_file"] = str(bad)
    with pytest.raises(ValueError, match=r"instances_file .*line 2.*comma-separated integers"):
        make_instances(params)
    params["game"]["instances_file"] = str(tmp_path / "missing.txt")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        make_instances(params)


def test_ex2psro_bad_variant_value_names_its_key():
    from icml25.pipelines.ex2psro.nodes import _params

    params = _base_params()
    params["variants"]["staghunt"]["game"]["stag"] = 1.0  # below hare: no stag hunt
    with pytest.raises(ParameterError, match=r"ex2psro\.variants\.staghunt\.game"):
        _params(params)
    params = _base_params()
    params["variants"]["staghunt"]["oracle"]["episodes"] = -3
    with pytest.raises(ParameterError, match=r"ex2psro\.variants\.staghunt\.oracle\.episodes"):
        _params(params)
