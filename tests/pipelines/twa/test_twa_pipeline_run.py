"""End to end: `kedro run --pipeline=twa --env=test` through a real KedroSession."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import mlflow
import pandas as pd
import pytest

from icml25.core.datasets import ArrayTreeDataset
from icml25.core.params import ParameterError
from icml25.core.sweep import seed_shards

pytestmark = pytest.mark.usefixtures("one_thread")

METHODS = {"base", "sft_all", "filter_sft", "dpo", "twa", "twa_token_ul", "twa_token_ul_l1",
           "twa_offtraj", "twa_seq", "twa_l1", "twa_l0.2", "dpo_sft0", "dpo_sft1", "sft_ref",
           "twa_with_refs", "twa_omission_gap"}
TUNED = {"sft_all", "filter_sft", "sft_ref", "dpo_sft0", "dpo_sft1", "twa_l1", "twa_l0.2"}
CLAIMED = {"base", "twa", "dpo", "filter_sft", "sft_all", "twa_token_ul", "twa_l1",
           "twa_token_ul_l1"}


def test_twa_runs_end_to_end_on_test_config(kedro_project, run_pipeline):
    run_pipeline("twa", env="test")
    out = kedro_project / "data/08_reporting/twa"
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["metrics"]) == METHODS
    names = {k for k in metrics["metrics"]["twa"] if not k.endswith("_std")}
    assert {"test_oracle_mqm", "test_error_free", "test_chrf", "test_bleu", "test_ter",
            "test_chrf_pp", "test_exact_match", "test_hard_oracle_mqm", "dev_oracle_mqm",
            "inspan_correct_dlogp", "inspan_wrong_dlogp", "test_p_vs_twa"} <= names
    selected = json.loads((kedro_project / "data/07_model_output/twa/results.json")
                          .read_text())["selected"]
    every_seed = CLAIMED | {selected["twa"]["variant"], selected["dpo"]["variant"]}
    for variant, values in metrics["metrics"].items():
        assert {k for k in values if not k.endswith("_std")} == names, variant
        assert math.isfinite(values["test_oracle_mqm"])
        # ablation_seeds: 1: the variants the claims compare on both seeds, the rest on seed 0
        n = 2 if variant in every_seed else 1
        assert len(metrics["per_seed"][variant]["test_oracle_mqm"]) == n, variant
        assert metrics["seeds_of"][variant] == [0, 1][:n], variant
    assert metrics["metrics"]["base"]["inspan_correct_dlogp"] == 0.0
    assert 0 <= metrics["data"]["error_free_share"] <= 1
    # dev selection: every tuned variant searched over the lr grid on the first seed, the
    # chosen lr is the dev-best grid point, checkpoints scored every eval_every steps
    results = json.loads((kedro_project / "data/07_model_output/twa/results.json").read_text())
    grid = results["grid"]
    for name in TUNED:
        points = [g for g in grid if g["variant"] == name]
        assert sorted(g["lr"] for g in points) == [3.0e-4, 1.0e-3], name
        best = min(points, key=lambda g: g["dev_oracle_mqm"])
        assert results["selected"][name]["lr"] == best["lr"]
        assert results["selected"][name]["dev_oracle_mqm"] == best["dev_oracle_mqm"]
        for g in points:
            assert [step for step, _ in g["dev_curve"]] == [2, 4]
            assert g["dev_oracle_mqm"] == min(v for _, v in g["dev_curve"])
    lam = results["selected"]["twa"]["ul_scale"]
    assert results["selected"]["twa_offtraj"]["lr"] == results["selected"][f"twa_l{lam:g}"]["lr"]
    assert metrics["per_seed"]["twa"]["test_oracle_mqm"] == \
        metrics["per_seed"][f"twa_l{lam:g}"]["test_oracle_mqm"]
    assert json.loads((kedro_project / "data/07_model_output/twa/real_results.json")
                      .read_text()) == {"enabled": False}
    # the selection holds the first seed's runs; every seed shard holds seeds[k::n] of [0, 1]
    model_out = kedro_project / "data/07_model_output/twa"
    selection = ArrayTreeDataset(str(model_out / "selection.npz"),
                                 dataclasses=["icml25.pipelines.twa.training.MethodConfig"])
    assert list(selection.load()["seeds"]) == [0]
    n = seed_shards()
    for k in range(n):
        runs = ArrayTreeDataset(str(model_out / f"method_runs_shard_{k}.npz")).load()
        assert list(runs) == [i for i in (0, 1) if i % n == k]

    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "twa" and claims["run"]["env"] == "test"
    assert claims["n_claims"] == len(claims["claims"]) == 8
    assert claims["confidence"] == 0.90
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert claim["holds"] is (claim["verdict"] == "holds")
        assert claim["n_seeds"] == 2
        if claim["unit"] == "sentence":  # oracle MQM paired over the 20 test sentences
            assert claim["metric"] == "test_oracle_mqm" and claim["test"] == "bootstrap"
            assert claim["n_pairs"] == 20
        else:
            assert claim["n_pairs"] == 2
        assert claim["method_value"] == pytest.approx(
            metrics["metrics"][claim["method"]][claim["metric"]])
        assert claim["baseline_value"] == pytest.approx(
            metrics["metrics"][claim["baseline"]][claim["metric"]])
    assert {p.name for p in (out / "figures").iterdir()} == {"test_oracle_mqm.png",
                                                             "within_span.png"}
    annotated = pd.read_parquet(kedro_project / "data/01_raw/twa/annotated.parquet")
    assert set(annotated["system"]) == {"other_0_greedy", "other_1_greedy", "other_0_sampled",
                                        "corrupted_reference"}
    assert (kedro_project / "data/06_models/twa/systems.safetensors").exists()

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(search_all_experiments=True, output_format="list")
    variant_runs = {r.info.run_name for r in runs if r.data.tags.get("icml25.pipeline") == "twa"}
    assert variant_runs >= METHODS


@pytest.mark.parametrize("override, key", [
    ({"loss": {"ul_scale": [0.2, 0.05]}}, "twa.loss"),
    ({"real": {"mqm_tsv_paths": ["/nonexistent/mqm.tsv"]}}, "twa.real.mqm_tsv_paths"),
])
def test_bad_parameters_fail_before_any_work(kedro_project, run_pipeline, override, key):
    with pytest.raises(Exception) as err:
        run_pipeline("twa", env="test", params={"twa": override})
    chain, e = [], err.value
    while e is not None:
        chain.append(e)
        e = e.__cause__ or e.__context__
    assert any(isinstance(x, ParameterError) and key in str(x) for x in chain), str(err.value)
    assert not (kedro_project / "data/01_raw/twa/corpus.parquet").exists()


def _base_params() -> dict:
    import yaml

    root = Path(__file__).resolve().parents[3]
    return yaml.safe_load((root / "conf/base/parameters_twa.yml").read_text())["twa"]


@pytest.mark.parametrize("section, override, key, words", [
    ("model", {"d_model": 15}, "twa.model", "not divisible by heads"),
    ("annotator", {"p_miss": 1.5}, "twa.annotator.p_miss", "less than 1"),
    ("systems", {"source": "self"}, "twa.systems.source", "others"),
    ("finetune", {"lr": [3.0e-4, -1.0]}, "twa.finetune", "lr grid values must be > 0"),
    ("finetune", {"eval_every": 1000}, "twa.finetune", "no checkpoint"),
    ("dpo", {"beta": []}, "twa.dpo.beta", "at least 1 item"),
    ("loss", {"omission_spans": "target"}, "twa.loss.omission_spans", "source_side"),
    ("real", {"merge_raters": "vote"}, "twa.real.merge_raters", "per_rater"),
    ("real", {"mqm_tsv_paths": ["/nonexistent/mqm.tsv"]}, "twa.real.mqm_tsv_paths",
     "not found"),
    ("real", {"methods": ["twa", "bon"]}, "twa.real.methods.1", "twa_seq"),
])
def test_bad_parameters_are_named_by_their_full_key(section, override, key, words):
    from icml25.core.params import validate_parameters
    from icml25.pipelines.twa.params import TwaParams

    params = _base_params()
    params[section] = params[section] | override
    with pytest.raises(ParameterError, match=re.escape(key)) as err:
        validate_parameters(TwaParams, params, "twa")
    assert words in str(err.value)


def test_real_checkpoint_is_required_with_mqm_files(tmp_path):
    from icml25.core.params import validate_parameters
    from icml25.pipelines.twa.params import TwaParams

    tsv = tmp_path / "mqm.tsv"
    tsv.write_text("system\tdoc\n", encoding="utf-8")
    params = _base_params()
    params["real"] = params["real"] | {"mqm_tsv_paths": [str(tsv)]}
    with pytest.raises(ParameterError, match=r"twa\.real\.hf_model_path: got None"):
        validate_parameters(TwaParams, params, "twa")
    params["real"]["hf_model_path"] = str(tmp_path)
    with pytest.raises(ParameterError, match="has none"):
        validate_parameters(TwaParams, params, "twa")
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    assert validate_parameters(TwaParams, params, "twa").real.enabled


def test_claim_metrics_pairs_oracle_mqm_over_test_sentences():
    from icml25.pipelines.twa.nodes import claim_metrics

    results = {"variants": {"a": {"test_oracle_mqm": [1.0, 2.0], "test_chrf": [50.0, 51.0]},
                            "b": {"test_oracle_mqm": [3.0, 3.0], "test_chrf": [49.0, 48.0]}},
               "segments": {"a": [[0.0, 2.0], [1.0, 3.0]], "b": [[5.0, 1.0], [5.0, 1.0]]}}
    unit = {"claim": "x", "metric": "test_oracle_mqm", "unit": "sentence"}
    seed = {"claim": "y", "metric": "test_chrf", "unit": None}
    out = claim_metrics(results, [unit, seed])
    assert out["a"]["test_oracle_mqm"] == {"s0000": [0.0, 1.0], "s0001": [2.0, 3.0]}
    assert out["b"]["test_chrf"] == [49.0, 48.0]
    assert results["variants"]["a"]["test_oracle_mqm"] == [1.0, 2.0]  # not modified
    # the mean over sentences of a seed's segments is that seed's metric
    assert [sum(v[s] for v in out["a"]["test_oracle_mqm"].values()) / 2 for s in (0, 1)] == \
        results["variants"]["a"]["test_oracle_mqm"]
    with pytest.raises(ValueError, match="only unit 'sentence'"):
        claim_metrics(results, [{**seed, "unit": "sentence"}])
    with pytest.raises(ValueError, match="both per sentence and per seed"):
        claim_metrics(results, [unit, {**unit, "unit": None}])
