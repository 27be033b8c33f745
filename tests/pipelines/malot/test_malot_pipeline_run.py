"""End to end: `kedro run --pipeline=malot --env=test` through a real KedroSession."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import mlflow
import pandas as pd
import pytest
import yaml

from icml25.core.datasets import ArrayTreeDataset
from icml25.core.params import ParameterError, validate_parameters
from icml25.core.sweep import seed_shards
from icml25.pipelines.malot.nodes import load_minif2f, read_minif2f
from icml25.pipelines.malot.params import LOT_VARIANTS, MalotParams

PROJECT = Path(__file__).resolve().parents[3]
MINIF2F = Path(os.environ.get("ICML25_MINIF2F")
               or PROJECT.parent / "shared/data/minif2f/minif2f_lean4.jsonl")
pytestmark = pytest.mark.usefixtures("one_thread")


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def _minif2f_params() -> dict:
    path = str(MINIF2F) if MINIF2F.exists() else "does/not/exist.jsonl"
    return {"malot": {"minif2f": {"path": path}}}


def test_malot_runs_end_to_end_on_test_config(kedro_project, run_pipeline):
    run_pipeline("malot", env="test", params=_minif2f_params())
    out = kedro_project / "data/08_reporting/malot"
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["metrics"]) == {"ma_lot", "whole_proof", *LOT_VARIANTS}
    names = {k for k in metrics["metrics"]["ma_lot"] if not k.endswith("_std")}
    for variant in metrics["metrics"]:
        assert names == {k for k in metrics["metrics"][variant] if not k.endswith("_std")}
    lot = metrics["metrics"]["lot_ma_lot"]
    assert lot["acc_minilean_round0"] <= lot["acc_minilean_round1"] <= lot["acc_minilean_round2"]
    assert metrics["metrics"]["lot_whole_proof"]["generations_per_theorem"] == 8
    assert metrics["metrics"]["lot_cot_off"]["generations_per_theorem"] == 8
    assert lot["generations_per_theorem"] <= 8
    assert set(metrics["lot_generated_tokens_per_theorem"]) == set(LOT_VARIANTS)
    for name in ("acc_minilean_round0", "acc_minilean_round1", "acc_minilean_round2",
                 "acc_minilean", "round_gain_1", "verify_time_per_proof_s"):
        assert _finite(metrics["metrics"]["ma_lot"][name]), name
    assert len(metrics["per_seed"]["ma_lot"]["acc_minilean"]) == 2  # test seeds [0, 1]
    assert metrics["metrics"]["whole_proof"]["generations_per_theorem"] == 8  # 4 + 2×2
    assert metrics["metrics"]["ma_lot"]["generations_per_theorem"] <= 8
    ma = metrics["metrics"]["ma_lot"]
    assert ma["acc_minilean_round0"] <= ma["acc_minilean_round1"] <= ma["acc_minilean_round2"]
    checker = metrics["checker"]
    assert checker["false_suite_accepted"] == 0 and checker["false_suite_size"] > 200
    assert checker["malformed_accepted"] == 0 and checker["malformed_size"] >= 10
    assert checker["lean_semantics_cases"] == 8  # conf/test
    assert checker["lean_semantics_proofs_tried"] == 8 * 3
    assert checker["lean_semantics_accepted_not_true"] == 0
    if MINIF2F.exists():
        assert checker["fragment_in_test"] > 50  # conf/test reads the test split only
        assert 0 < checker["fragment_coverage_test"] < 1
        assert _finite(ma["acc_minilean_minif2f"])

    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "malot" and claims["run"]["env"] == "test"
    assert claims["n_claims"] == len(claims["claims"]) == 12
    assert claims["confidence"] == 0.90
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert claim["holds"] == (claim["verdict"] == "holds")
        assert _finite(claim["method_value"]) and _finite(claim["baseline_value"])
        if claim["unit"] == "theorem":  # paired over the 12 synthetic held-out theorems
            assert claim["n_pairs"] == 12 and claim["n_seeds"] == 2
            per_theorem = metrics["per_unit"][claim["method"]][claim["metric"]]
            assert claim["method_value"] == pytest.approx(
                sum(sum(v) / len(v) for v in per_theorem.values()) / len(per_theorem))
        elif claim["method"] in metrics["metrics"]:
            assert claim["method_value"] == pytest.approx(
                metrics["metrics"][claim["method"]][claim["metric"]])
    solved = metrics["per_unit"]["ma_lot"]["solved_by_theorem"]
    assert sum(sum(v) for v in solved.values()) / (2 * len(solved)) == pytest.approx(
        metrics["metrics"]["ma_lot"]["acc_minilean"])
    for metric in ("false_suite_accepted", "random_accepted_with_counterexample",
                   "malformed_accepted", "lean_semantics_accepted_not_true"):
        sound = next(c for c in claims["claims"] if c["metric"] == metric)
        assert sound["verdict"] == "holds" and sound["test"] == "exact"
        assert sound["method_value"] == 0

    assert {p.name for p in (out / "figures").iterdir()} == {"rounds.png", "errors.png",
                                                             "lot_rounds.png"}
    lot_solved = pd.read_parquet(kedro_project / "data/07_model_output/malot/lot_solved.parquet")
    assert set(lot_solved["variant"]) == set(LOT_VARIANTS)
    assert set(lot_solved["set"]) <= {"synthetic", "minif2f"}
    training = pd.read_csv(kedro_project / "data/06_models/malot/lot_training.csv")
    assert set(training["phase"]) == {"stage1+2", "full", "no_cd"}
    assert set(training["seed"]) == {0, 1}
    assert (kedro_project / "data/07_model_output/malot/attempts.parquet").exists()
    # one LoT-Solver bundle per seed shard: seed i of [0, 1] is trained by shard i % n
    n = seed_shards()
    for k in range(n):
        bundle = ArrayTreeDataset(
            str(kedro_project / f"data/06_models/malot/lot_solver_shard_{k}.npz")).load()
        assert sorted(bundle.get("models", {})) == [i for i in (0, 1) if i % n == k]
    assert (kedro_project / "data/01_raw/malot/synth_corrections.parquet").exists()

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["malot"], output_format="list")
    parent = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parent) == 1 and parent[0].info.run_name == "malot"
    assert parent[0].data.metrics["false_suite_accepted"] == 0
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    assert children["ma_lot"].data.tags["icml25.role"] == "method"
    assert children["whole_proof"].data.tags["icml25.role"] == "baseline"
    assert set(children["ma_lot"].data.metrics) == set(children["whole_proof"].data.metrics)
    assert children["lot_ma_lot"].data.tags["icml25.role"] == "method"
    assert children["lot_no_cd_ma_lot"].data.tags["icml25.role"] == "ablation"
    assert set(children["lot_ma_lot"].data.metrics) == set(children["ma_lot"].data.metrics)


def test_bad_parameter_stops_before_any_work(kedro_project, run_pipeline):
    with pytest.raises(ParameterError, match=r"malot\.budget\.x: got 0"):
        run_pipeline("malot", env="test", params={"malot": {"budget": {"x": 0}}})
    assert not any((kedro_project / "data/01_raw").iterdir())


@pytest.mark.parametrize(("override", "message"), [
    ({"budget": {"y": 3, "corrections_per_proof": 2}}, r"malot\.budget: .*multiple of corr"),
    ({"agent": {"backend": "openai"}}, r"malot\.agent: .*needs base_url"),
    ({"agent": {"backend": "hf"}}, r"malot\.agent: .*needs model_path"),
    ({"verifier": {"timeout_s": -1}}, r"malot\.verifier\.timeout_s: got -1"),
    ({"synth": {"families": ["geometry"]}}, r"malot\.synth\.families\.0: got 'geometry'"),
    ({"seeds": [1, 1]}, r"malot\.seeds: .*distinct"),
    ({"lot": {"d_model": 30, "n_heads": 4}}, r"malot\.lot: .*even size"),
    ({"lot": {"max_seq_len": 64, "thought_tokens": 40}}, r"malot\.lot: .*no room"),
    ({"lot": {"replay": 1.0}}, r"malot\.lot\.replay: got 1\.0"),
    ({"lot": {"stage2_steps": 0}}, r"malot\.lot\.stage2_steps: got 0"),
])
def test_parameter_validation_names_the_full_key(override, message):
    base = yaml.safe_load((PROJECT / "conf/base/parameters_malot.yml").read_text())["malot"]
    for key, value in override.items():
        base[key] = {**base[key], **value} if isinstance(value, dict) else value
    with pytest.raises(ParameterError, match=message):
        validate_parameters(MalotParams, base, "malot")


def test_corrupt_minif2f_file_is_a_clear_error(kedro_project, run_pipeline, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": "a", "split": "test", "formal_statement": "theorem a : 1 = 1 := '
                   'sorry", "informal_stmt": "x"}\n{not json\n')
    with pytest.raises(ValueError, match=r"bad\.jsonl:2: not valid JSON"):
        run_pipeline("malot", env="test", params={"malot": {"minif2f": {"path": str(bad)}}})
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n")
    with pytest.raises(ValueError, match="no miniF2F records"):
        read_minif2f(empty)
    missing = tmp_path / "fields.jsonl"
    missing.write_text('{"id": "a", "split": "test"}\n')
    with pytest.raises(ValueError, match=r"fields\.jsonl:1: missing fields \['formal_statement'"):
        read_minif2f(missing)
    no_proof = tmp_path / "noassign.jsonl"
    no_proof.write_text('{"id": "a", "split": "test", "formal_statement": "theorem a : 1 = 1", '
                        '"informal_stmt": "x"}\n')
    with pytest.raises(ValueError, match="has no ':='"):
        read_minif2f(no_proof)


def test_minif2f_path_from_environment(tmp_path, monkeypatch):
    """``$ICML25_MINIF2F`` replaces the default path (a clone outside the shared workspace), but
    never a path given explicitly."""
    tree = yaml.safe_load((PROJECT / "conf/base/parameters_malot.yml").read_text())["malot"]
    copy = tmp_path / "mini.jsonl"
    copy.write_text('{"id": "t1", "split": "test", "formal_statement": "theorem t1 (x : ℝ) '
                    '(h₀ : x = 2) : x + 1 = 3 := sorry", "informal_stmt": "x"}\n')
    monkeypatch.setenv("ICML25_MINIF2F", str(copy))
    frame = load_minif2f(tree)
    assert list(frame["name"]) == ["t1"] and frame["statement"][0].endswith(":= by")
    other = tmp_path / "other.jsonl"
    other.write_text(copy.read_text().replace("t1", "t2"))
    frame = load_minif2f({**tree, "minif2f": {**tree["minif2f"], "path": str(other)}})
    assert list(frame["name"]) == ["t2"]
    monkeypatch.setenv("ICML25_MINIF2F", str(tmp_path / "absent.jsonl"))
    with pytest.raises(FileNotFoundError, match="ICML25_MINIF2F"):
        load_minif2f({**tree, "minif2f": {**tree["minif2f"], "required": True}})


def test_required_minif2f_must_exist(kedro_project, run_pipeline):
    with pytest.raises(FileNotFoundError, match=r"malot\.minif2f\.path"):
        load_minif2f({**yaml.safe_load((PROJECT / "conf/base/parameters_malot.yml").read_text())
                      ["malot"], "minif2f": {"path": "nowhere.jsonl", "required": True}})


def test_run_variants_with_an_openai_compatible_endpoint():
    """The model path of the pipeline's proving node (conf/paper's agent backend) against a
    loopback stub endpoint, with MiniLean as the verifier."""
    import pandas as pd

    from icml25.core.chat import stub_requests, stub_server
    from icml25.pipelines.malot.nodes import generate_synthetic, run_variants

    tree = yaml.safe_load((PROJECT / "conf/base/parameters_malot.yml").read_text())["malot"]
    tree.update(seeds=[0], progress=False,
                synth={**tree["synth"], "n_train": 6, "n_heldout": 6,
                       "corrections_per_theorem": 1})

    def reply(body):
        text = body["messages"][-1]["content"]
        tactic = "constructor <;> linarith" if "Lean 4 failed" in text else "linarith"
        return f"<Thought>plan</Thought>\n<Output>\n```lean4\ntheorem x := by\n  {tactic}\n```"

    theorems, _ = generate_synthetic(tree)
    empty = pd.DataFrame(columns=["split", "name", "statement", "nl"])
    coverage = pd.DataFrame(columns=["split", "name", "in_fragment", "reason"])
    with stub_server(reply) as url:
        tree["agent"] = {**tree["agent"], "backend": "openai", "base_url": url, "model": "stub"}
        attempts, solved = run_variants(theorems, empty, coverage, tree)
        sent = stub_requests(url)
    assert set(solved["variant"]) == {"ma_lot", "whole_proof"} and len(solved) == 12
    assert "corrector" in set(attempts["role"])
    assert (solved.loc[solved["variant"] == "whole_proof", "generations"] == 8).all()
    assert len(sent) == int(solved["generations"].sum())  # one request per generation
    conj = solved[(solved["family"] == "conjunction") & (solved["variant"] == "ma_lot")]
    assert (conj["solved_round"] == 1).all()  # fixed after reading Lean's error
    assert "Name: " in sent[0]["messages"][1]["content"]  # few-shot + target in the user turn
