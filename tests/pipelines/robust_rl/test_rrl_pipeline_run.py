"""End to end: `kedro run --pipeline=robust_rl --env=test` through a real KedroSession, and
refusal of bad parameters and bad models before any work."""

from __future__ import annotations

import json
import math
from pathlib import Path

import mlflow
import pandas as pd
import pytest

from icml25.core.mdp import MDPError
from icml25.core.params import ParameterError
from icml25.pipelines.robust_rl.nodes import DQN_VARIANTS

TABULAR = {"reduction_eps0.1", "reduction_eps0.05", "fixed_gamma_0.9", "fixed_gamma_0.99",
           "robust_rvi_phat", "nonrobust_plugin", "robust_rvi_qlearning"}
LINEAR = {"robust_linear", "nonrobust_linear", "robust_linear_gamma0.99"}
ONEHOT = {"robust_linear_onehot", "robust_linear_onehot_global"}
DQN = {"robust_dqn", "dqn", "robust_dqn_gamma0.99"}


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def test_robust_rl_runs_end_to_end_on_test_config(kedro_project, run_pipeline, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    run_pipeline("robust_rl", env="test")
    out = kedro_project / "data/08_reporting/robust_rl"
    metrics = json.loads((out / "metrics.json").read_text())
    assert set(metrics["metrics"]) == TABULAR | LINEAR | ONEHOT | DQN
    # convergence is judged against the tabular answer; the discount and spans are reported
    for variant in ONEHOT:
        assert _finite(metrics["metrics"][variant]["onehot_q_rel_error"])
    discount = metrics["discount"]["garnet_sparse/tv0.4/eps0.05"]
    assert discount["true_span"] == pytest.approx(
        metrics["truth"]["garnet_sparse"]["tv0.4"]["span_h_star"])
    assert discount["H_hat_min"] <= discount["H_hat_mean"] <= discount["H_hat_max"]
    assert 0 <= discount["clamped_models"] <= discount["models"] == 2 * 2  # N_grid x seeds
    for block in (metrics["fa_linear"], metrics["fa_linear"]["onehot"]):
        assert {"H", "gamma_raw", "gamma", "gamma_clamped", "span_h_star"} <= set(block)
    groups = metrics["variant_groups"]
    for group in groups.values():  # identical metric names inside each study
        names = [{k for k in metrics["metrics"][v] if not k.endswith(("_std", "_over_3eps"))}
                 for v in group]
        assert all(n == names[0] for n in names)
    red = metrics["metrics"]["reduction_eps0.05"]
    for key in ("garnet_sparse/tv0.4/gap_N10", "garnet_sparse/tv0.4/gap_Nmax",
                "recycling_robot/contamination0.2/gap_N100", "garnet_sparse/tv0.4/slope"):
        assert key in red
    assert len(metrics["per_seed"]["reduction_eps0.05"]["garnet_sparse/tv0.4/gap_Nmax"]) == 2
    # Q-learning runs only on contamination sets: NaN (null) on TV, finite otherwise
    q = metrics["metrics"]["robust_rvi_qlearning"]
    assert q["garnet_sparse/tv0.4/gap_Nmax"] is None
    assert _finite(q["garnet_sparse/contamination0.2/gap_Nmax"])
    truth = metrics["truth"]["garnet_sparse"]["tv0.4"]
    assert truth["g_star"] > 0 and truth["span_h_star"] > 0

    gaps = pd.read_parquet(kedro_project / "data/07_model_output/robust_rl/gaps.parquet")
    assert (gaps["gap"] >= -1e-8).all()  # no policy beats the robust optimum
    assert (gaps["robust_gain"] <= gaps["nominal_gain"] + 1e-8).all()
    largest = gaps[gaps["N"] == gaps["N"].max()]
    assert (largest["robust_gain"] <= largest["sampled_gain_min"] + 1e-8).all()
    reductions = gaps[gaps["method"].str.startswith("reduction")]
    assert (reductions["gamma"] >= 0.5).all() and (reductions["gamma"] <= 0.9999).all()
    assert (reductions["gamma"] <= reductions["gamma_raw"].clip(lower=0.5) + 1e-12).all()

    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "robust_rl" and claims["run"]["env"] == "test"
    assert claims["n_claims"] == len(claims["claims"]) == 14  # 12 + the 2 CartPole claims
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert claim["ci_level"] == 0.90
        assert _finite(claim["baseline_value"])
        if claim["baseline"] in metrics["metrics"]:
            assert claim["method_value"] == pytest.approx(
                metrics["metrics"][claim["method"]][claim["metric"]])
    # on this tiny Garnet the reduction and fixed gamma = 0.9 pick the same policy on every seed:
    # a tie with no spread is evidence against "below", never a win
    tie = next(c for c in claims["claims"] if c["baseline"] == "fixed_gamma_0.9")
    assert tie["difference"] == 0 and tie["ci_low"] == tie["ci_high"] == 0
    assert tie["verdict"] == "fails"
    assert {p.name for p in (out / "figures").iterdir()} == {
        "gap_vs_N.png", "gap_vs_eps.png", "fa_linear.png", "cartpole_grid.png"}
    # one folder per DQN variant and seed shard; fa_dqn.seeds [0] is trained by shard 0 alone
    models = kedro_project / "data/07_model_output/robust_rl/dqn_models"
    assert sorted(p.relative_to(models).as_posix() for p in models.rglob("*.safetensors")) == \
        sorted(f"{role}/shard_0/{v}_seed0.safetensors" for role, v in zip(
            DQN_VARIANTS, ("robust_dqn", "dqn", "robust_dqn_gamma0.99"), strict=True))
    assert {p.name for p in models.iterdir()} == set(DQN_VARIANTS)
    cartpole = pd.read_parquet(kedro_project / "data/07_model_output/robust_rl/cartpole_eval.parquet")
    assert len(cartpole) == 3 * 4 and cartpole["avg_reward"].between(0, 1).all()

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["robust_rl"], output_format="list")
    parent = [r for r in runs if "mlflow.parentRunId" not in r.data.tags]
    assert len(parent) == 1 and {r.info.status for r in runs} == {"FINISHED"}
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    for variant in TABULAR | LINEAR | ONEHOT | DQN:
        assert variant in children, variant
    logged = parent[0].data.metrics
    assert logged["discount.garnet_sparse/tv0.4/eps0.05.true_span"] == pytest.approx(
        discount["true_span"])
    assert logged["discount.garnet_sparse/tv0.4/eps0.05.clamped_models"] == \
        discount["clamped_models"]
    assert logged["fa_linear.gamma_raw"] == pytest.approx(metrics["fa_linear"]["gamma_raw"])
    assert logged["fa_onehot.H"] == pytest.approx(metrics["fa_linear"]["onehot"]["H"])
    assert children["robust_linear_onehot_global"].data.tags["icml25.role"] == "ablation"
    assert "onehot_q_rel_error" in children["robust_linear_onehot"].data.metrics
    assert children["reduction_eps0.05"].data.tags["icml25.role"] == "method"
    assert children["nonrobust_plugin"].data.tags["icml25.role"] == "baseline"
    assert "garnet_sparse/tv0.4/gap_Nmax" in children["nonrobust_plugin"].data.metrics
    assert "final_robust_gain" in children["nonrobust_linear"].data.metrics
    assert "robust_linear/training/seed 0" in children


BAD = [
    ({"uncertainty": [{"type": "tv", "radius": 1.4}]},
     r"robust_rl\.uncertainty\.0\.radius: got 1\.4; .*tv radius must lie in \[0, 1\]"),
    ({"uncertainty": [{"type": "kl", "radius": -0.1}]},
     r"robust_rl\.uncertainty\.0\.radius: .*kl radius must be finite and >= 0"),
    ({"tabular": {"eps": [0.1, 0.0]}},
     r"robust_rl\.tabular\.eps: .*eps \(target accuracy\) must be > 0"),
    ({"fa_linear": {"eps": -0.05}}, r"robust_rl\.fa_linear\.eps: .*must be > 0"),
    ({"fa_dqn": {"eps": 0.0}}, r"robust_rl\.fa_dqn\.eps: .*must be > 0"),
    ({"tabular": {"H": -1.0}}, r"robust_rl\.tabular\.H: .*span bound H must be > 0"),
    ({"tabular": {"N_grid": [100, 10]}}, r"robust_rl\.tabular\.N_grid: .*increasing"),
    ({"fa_dqn": {"grid": {"action_noise": [1.5]}}}, r"robust_rl\.fa_dqn\.grid: .*action_noise"),
    ({"envs": [{"name": "g", "kind": "garnet_sparse", "n_states": 4}]},
     r"robust_rl\.envs\.0: .*garnet_sparse needs \['n_actions', 'branching'\]"),
    ({"tabular": {"typo": 1}}, r"robust_rl\.tabular\.typo: unexpected parameter"),
]


@pytest.mark.parametrize(("override", "message"), BAD)
def test_bad_parameters_are_named_with_their_full_key(override, message):
    from omegaconf import OmegaConf

    from icml25.core.params import validate_parameters
    from icml25.pipelines.robust_rl.params import RobustRLParams

    root = Path(__file__).resolve().parents[3] / "conf"
    tree = OmegaConf.merge(*(OmegaConf.load(root / env / "parameters_robust_rl.yml")
                             for env in ("base", "test")), {"robust_rl": override})
    params = OmegaConf.to_container(tree)["robust_rl"]
    with pytest.raises(ParameterError, match=message):
        validate_parameters(RobustRLParams, params, "robust_rl")


@pytest.mark.parametrize(("override", "message"), [BAD[0]])
def test_bad_parameter_stops_the_run_before_any_work(kedro_project, run_pipeline, override,
                                                     message):
    with pytest.raises(ParameterError, match=message):
        run_pipeline("robust_rl", env="test", params={"robust_rl": override})
    assert not any((kedro_project / "data/01_raw").iterdir())


def test_non_communicating_model_is_refused(kedro_project, run_pipeline):
    env = {"name": "broken", "kind": "garnet_sparse", "n_states": 8, "n_actions": 1,
           "branching": 1, "n_goals": 1, "seed": 0}
    with pytest.raises(MDPError, match=r"broken.*not communicating"):
        run_pipeline("robust_rl", env="test", params={"robust_rl": {"envs": [env]}})
    # refused by the first node, before the function-approximation studies ran
    assert not any((kedro_project / "data/07_model_output").iterdir())
