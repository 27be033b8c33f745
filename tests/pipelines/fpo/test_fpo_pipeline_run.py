"""End to end: `kedro run --pipeline=fpo --env=test` through a real KedroSession."""

from __future__ import annotations

import json
import math

import mlflow
import pandas as pd
import pytest

from icml25.core.params import ParameterError
from icml25.core.sweep import seed_shards

pytestmark = pytest.mark.usefixtures("one_thread")
METHODS = ("dpo", "simpo", "tdpo1", "tdpo2", "fpo")


def test_fpo_runs_end_to_end_on_test_config(kedro_project, run_pipeline):
    run_pipeline("fpo", env="test")
    out = kedro_project / "data/08_reporting/fpo"
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["metrics"]) == {"sft", *METHODS}
    names = {k for k in metrics["metrics"]["fpo"] if not k.endswith("_std")}
    for variant, values in metrics["metrics"].items():
        assert {k for k in values if not k.endswith("_std")} == names, variant
    assert len(metrics["per_seed"]["fpo"]["mean_reward_t0"]) == 2        # test seeds [0, 1]
    for method in METHODS:
        m = metrics["metrics"][method]
        assert math.isfinite(m["mean_reward_t0"]) and 0 <= m["win_vs_sft_t0"] <= 1
        assert m["step_ms"] > 0 and m["seq_kl"] >= 0 and m["feature_mse"] >= 0
        assert m["ref_forwards_per_step"] == (1.0 if method in ("dpo", "tdpo1", "tdpo2")
                                              else 0.0)
    # SFT against itself ties on every prompt; its drift to itself is zero
    assert metrics["metrics"]["sft"]["win_vs_sft_t0"] == pytest.approx(0.5)
    assert metrics["metrics"]["sft"]["seq_kl"] == pytest.approx(0.0, abs=1e-6)
    assert metrics["metrics"]["fpo"]["fpo_win_rate_against_t0"] == pytest.approx(0.5)
    assert metrics["sae"]["m"] == 32 and metrics["sae"]["fvu"] >= 0

    claims = json.loads((out / "claims.json").read_text())
    assert claims["n_claims"] == len(claims["claims"]) == 13
    assert claims["confidence"] == 0.90
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert claim["holds"] is (claim["verdict"] == "holds")
        assert claim["n_seeds"] == 2
        # reward and win-rate claims pair over the 12 + 4 evaluation prompts, the rest over seeds
        assert claim["n_pairs"] == (16 if claim["unit"] == "prompt" else 2), claim["claim"]
        if claim["baseline"] in metrics["metrics"]:
            assert claim["baseline_value"] == pytest.approx(
                metrics["metrics"][claim["baseline"]][claim["metric"]])
        assert claim["method_value"] == pytest.approx(
            metrics["metrics"][claim["method"]][claim["metric"]])
    assert (out / "figures" / "fpo_overview.png").stat().st_size > 0

    gens = pd.read_parquet(kedro_project / "data/07_model_output/fpo/generations.parquet")
    assert set(gens["variant"]) == {"sft", *METHODS}
    assert set(gens["temperature"]) == {0.0, 0.7}
    models = kedro_project / "data/06_models/fpo"
    # the first seed's policy at the chosen learning rate, then one folder per seed shard:
    # seed i of [0, 1] is trained by shard i % n (the first by its selection run)
    n = seed_shards()
    assert sorted(p.relative_to(models / "fpo").as_posix()
                  for p in (models / "fpo").rglob("*.safetensors")) == sorted(
        ["lr_selection/seed_0.safetensors", *(f"shard_{i % n}/seed_{i}.safetensors"
                                              for i in (0, 1))])

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["fpo"], output_format="list")
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    for variant in ("sft", *METHODS):
        assert "mean_reward_t0" in children[variant].data.metrics
    assert children["fpo"].data.tags["icml25.role"] == "method"


def test_fpo_bad_parameters_fail_before_any_work(kedro_project, run_pipeline):
    with pytest.raises(ParameterError, match=r"fpo\.sae\.m"):
        run_pipeline("fpo", env="test", params={"fpo": {"sae": {"m": -4}}})
    with pytest.raises(ParameterError, match=r"fpo: .*sae.layer 5 exceeds model.n_layers 2"):
        run_pipeline("fpo", env="test", params={"fpo": {"sae": {"layer": 5}}})
    with pytest.raises(ParameterError, match=r"fpo\.align\.methods"):
        run_pipeline("fpo", env="test", params={"fpo": {"align": {"methods": ["ppo"]}}})
    assert not (kedro_project / "data/01_raw/fpo").exists()


def test_prompt_metrics_pairs_rewards_and_wins_over_prompts():
    from icml25.pipelines.fpo.nodes import prompt_metrics

    rows = []
    for variant, r in {"sft": [[0.0, 1.0], [0.0, 1.0]], "fpo": [[1.0, 1.0], [0.0, 2.0]],
                       "dpo": [[2.0, 0.0], [0.0, 0.5]]}.items():
        for seed in (1, 0):  # stored out of order: values follow the seed order
            rows += [{"variant": variant, "seed": seed, "temperature": 0.0, "prompt": i,
                      "reward": r[seed][i]} for i in range(2)]
    gens = pd.DataFrame(rows)
    metrics = {v: {"mean_reward_t0": [0.0, 0.0], "entropy": [1.0, 2.0]}
               for v in ("sft", "fpo", "dpo")}
    specs = [{"claim": "a", "metric": "mean_reward_t0", "unit": "prompt"},
             {"claim": "b", "metric": "win_vs_sft_t0", "unit": "prompt"},
             {"claim": "c", "metric": "fpo_win_rate_against_t0", "unit": "prompt"},
             {"claim": "d", "metric": "entropy", "unit": None}]
    out = prompt_metrics(gens, metrics, specs)
    assert out["fpo"]["mean_reward_t0"] == {"p0000": [1.0, 0.0], "p0001": [1.0, 2.0]}
    assert out["fpo"]["win_vs_sft_t0"] == {"p0000": [1.0, 0.5], "p0001": [0.5, 1.0]}
    assert out["dpo"]["fpo_win_rate_against_t0"] == {"p0000": [0.0, 0.5], "p0001": [1.0, 1.0]}
    assert out["sft"]["entropy"] == [1.0, 2.0]
    assert metrics["fpo"]["mean_reward_t0"] == [0.0, 0.0]  # not modified
    with pytest.raises(ValueError, match="only 'prompt'"):
        prompt_metrics(gens, metrics, [{**specs[0], "unit": "sentence"}])
    with pytest.raises(ValueError, match="both per prompt and per seed"):
        prompt_metrics(gens, metrics, [specs[0], {**specs[0], "unit": None}])
    with pytest.raises(ValueError, match="no per-prompt values"):
        prompt_metrics(gens, metrics, [{**specs[3], "unit": "prompt"}])
