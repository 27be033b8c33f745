"""End to end: `kedro run --pipeline=sortformer --env=test` through a real KedroSession, and
parameter refusals before any work."""

from __future__ import annotations

import json
import math

import mlflow
import numpy as np
import pytest

from icml25.core.claims import validate_claims_document as check_claims_document
from icml25.core.params import ParameterError, validate_parameters
from icml25.core.sweep import seed_shards
from icml25.pipelines.sortformer.nodes import ROBUST_METRICS, SWAP_COLUMNS
from icml25.pipelines.sortformer.params import SortformerParams

pytestmark = pytest.mark.usefixtures("one_thread")


def _finite(value) -> bool:
    return value is not None and math.isfinite(value)


def test_sortformer_runs_end_to_end_on_test_config(kedro_project, run_pipeline, tmp_path):
    run_pipeline("sortformer", env="test")
    out = kedro_project / "data/08_reporting/sortformer"
    metrics = json.loads((out / "metrics.json").read_text())
    diar = {"pil", "sort", "hybrid", "clustering", "clustering_oracle_k"}
    asr = {"asr_none", "asr_sortformer", "asr_oracle"}
    assert diar | asr == set(metrics["metrics"])
    names = {k for k in metrics["metrics"]["hybrid"] if not k.endswith("_std")}
    for variant in diar:
        assert {k for k in metrics["metrics"][variant] if not k.endswith("_std")} == names
    for name in ("der_c025_test", "der_c0_test", "f1_pil_test", "f1_ats_test", "der_c025_inpool"):
        assert _finite(metrics["metrics"]["hybrid"][name]), name
    assert len(metrics["per_seed"]["hybrid"]["der_c025_test"]) == 2  # test seeds [0, 1]
    assert _finite(metrics["metrics"]["asr_sortformer"]["cpwer_all"])
    stats = metrics["session_stats"]
    assert set(stats) >= {"train", "val", "test", "test_inpool"}

    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "sortformer" and claims["run"]["env"] == "test"
    assert claims["n_claims"] == len(claims["claims"]) >= 10
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert claim["holds"] == (claim["verdict"] == "holds")
        assert _finite(claim["method_value"]), claim["claim"]
        assert claim["method_value"] == pytest.approx(
            metrics["metrics"][claim["method"]][claim["metric"]])
        assert claim["n_pairs"] == 2  # paired over the test seeds [0, 1]
        if claim["baseline"] == "clustering":  # deterministic: its one value on both seeds
            assert len(metrics["per_seed"]["clustering"][claim["metric"]]) == 1
            value = metrics["metrics"]["clustering"][claim["metric"]]
            if _finite(value):
                assert claim["baseline_value"] == pytest.approx(value)

    assert {p.name for p in (out / "figures").iterdir()} == {
        "activity.png", "der_by_speakers.png", "f1_ats_vs_pil.png"}
    raw = kedro_project / "data/01_raw/sortformer"
    assert (raw / "sessions.rttm").read_text().startswith("SPEAKER ")
    models = kedro_project / "data/06_models/sortformer"
    # one folder per seed shard: seed i of [0, 1] is trained by shard i % n
    n = seed_shards()
    assert sorted(p.relative_to(models / "hybrid").as_posix()
                  for p in (models / "hybrid").rglob("*.safetensors")) == [
        f"shard_{i % n}/seed_{i}.safetensors" for i in (0, 1)]

    mlflow.set_tracking_uri(f"sqlite:///{kedro_project / 'mlflow.db'}")
    runs = mlflow.search_runs(experiment_names=["sortformer"], output_format="list")
    children = {r.info.run_name: r for r in runs if "mlflow.parentRunId" in r.data.tags}
    for variant in diar:
        assert "der_c025_test" in children[variant].data.metrics, variant
    for variant in asr:
        assert "cpwer_all" in children[variant].data.metrics, variant
    assert children["hybrid"].data.tags["icml25.role"] == "method"
    assert children["pil"].data.tags["icml25.role"] == "baseline"
    assert "hybrid/training/seed 0" in children

    # robustness metrics of every diarizer; the synthesised long-session check beside clustering
    for variant in ("pil", "sort", "hybrid", "clustering"):
        for name in ROBUST_METRICS:
            assert name in metrics["metrics"][variant], (variant, name)
        assert 0.0 <= metrics["metrics"][variant]["swap_order_rate"] <= 1.0
    # the swap claims pair over the session pairs: each pair's outcome per seed, whose mean over
    # the pairs is the seed's rate
    assert metrics["swap_test"] | {"n_near": 0} == {"enabled": True, "n_pairs": 2,
                                                    "near_gap_s": 0.8, "n_near": 0, "seed": 0}
    for variant in ("pil", "sort", "hybrid"):
        pairs = metrics["per_unit"][variant]["pairs_swap_order_rate"]
        assert len(pairs) == 2 and all(len(v) == 2 for v in pairs.values())
        per_seed = np.mean([v for v in pairs.values()], axis=0)
        assert per_seed.tolist() == pytest.approx(metrics["per_seed"][variant]["swap_order_rate"])
    swap_claims = [c for c in claims["claims"] if c["metric"] == "swap_order_rate"]
    assert swap_claims and all(c["unit"] == "pair" for c in swap_claims)
    check = metrics["audio_check"]
    assert check["enabled"] and check["source"]["path"] is None
    assert set(check["mean"]) == {"pil", "sort", "hybrid", "clustering"}
    assert _finite(check["mean"]["clustering"]["der_c025"])

    _claims_follow_the_stages_that_ran(kedro_project)
    _check_audio_on_a_named_wav(kedro_project, tmp_path)


def _claims_follow_the_stages_that_ran(kedro_project):
    """Every optional stage turned off in turn (msasr, robustness, the audio check): its node's
    output is what the stage gives when off, and the claims are built from what remains."""
    import pandas as pd

    from icml25.pipelines.sortformer import nodes

    data = kedro_project / "data"
    der = pd.read_csv(data / "07_model_output/sortformer/der_table.csv")
    clu = pd.read_csv(data / "07_model_output/sortformer/clustering_table.csv")
    cpwer = pd.read_csv(data / "07_model_output/sortformer/cpwer_table.csv")
    stats = json.loads((data / "01_raw/sortformer/session_stats.json").read_text())
    run_info = {"env": "test", "date": "now", "commit": "x"}
    tree = _tree(kedro_project)
    asr_claims = [c["claim"] for c in tree["claims"] if c["method"].startswith("asr_")]
    tree["claims"].append({"claim": "Hybrid keeps arrival order in the swap test",
                           "metric": "swap_order_rate", "unit": "pair", "method": "hybrid",
                           "relation": "better", "direction": "higher", "threshold": 0.8})
    off = {
        "msasr": (dict(cpwer=cpwer[:0]), asr_claims),
        "robustness": (dict(der=der.drop(columns=[*ROBUST_METRICS, *SWAP_COLUMNS]),
                            clu=clu.drop(columns=[*ROBUST_METRICS, *SWAP_COLUMNS])),
                       [c["claim"] for c in tree["claims"] if c["metric"] in ROBUST_METRICS]),
        "audio_check": ({}, []),
    }
    for stage, (tables, dropped) in off.items():
        t = {**tree, stage: {**tree[stage], "enabled": False}}
        if stage == "msasr":  # the stage's own node, turned off
            assert nodes.train_evaluate_msasr(pd.DataFrame(), pd.DataFrame(), {}, t).empty
        if stage == "audio_check":
            assert nodes.check_audio(None, None, der, clu, t) == {"enabled": False}
        report, claims = nodes.judge_claims(tables.get("der", der), tables.get("clu", clu),
                                            tables.get("cpwer", cpwer), stats, t, run_info, 0.9,
                                            None if stage == "audio_check" else {})
        judged = [c["claim"] for c in claims["claims"]]
        assert judged == [c["claim"] for c in t["claims"] if c["claim"] not in dropped], stage
        assert [d["claim"] for d in report["claims_not_run"]] == dropped, stage
        check_claims_document(claims, where=stage)


def _check_audio_on_a_named_wav(kedro_project, tmp_path):
    """The documented command on a user-named wav: two synthetic 'speakers' (harmonic tones of
    different pitch, 8 kHz stereo int16, resampled by the check) with their reference RTTM."""
    from kedro.framework.session import KedroSession
    from scipy.io import wavfile

    sr = 8000
    t = np.arange(int(6.0 * sr)) / sr
    x = np.zeros_like(t)
    for f0, (a, b) in ((140.0, (0.5, 2.5)), (260.0, (2.0, 4.5)), (140.0, (4.8, 5.8))):
        m = (t >= a) & (t < b)
        x[m] += sum(np.sin(2 * np.pi * k * f0 * t[m]) / k for k in range(1, 6))
    x += 0.01 * np.random.default_rng(0).standard_normal(t.size)
    pcm = (0.3 * x / np.abs(x).max() * 32767).astype(np.int16)
    wav = tmp_path / "meeting.wav"
    wavfile.write(wav, sr, np.stack([pcm, pcm], axis=1))
    rttm = tmp_path / "meeting.rttm"
    rttm.write_text("".join(f"SPEAKER meeting 1 {a:.3f} {b - a:.3f} <NA> <NA> {s} <NA> <NA>\n"
                            for s, a, b in (("A", 0.5, 2.5), ("B", 2.0, 4.5), ("A", 4.8, 5.8))))
    params = {"sortformer": {"audio_check": {"path": str(wav), "rttm": str(rttm)}}}
    with KedroSession.create(project_path=kedro_project, env="test",
                             runtime_params=params) as session:
        session.run(pipeline_names=["sortformer"], node_names=["sortformer.check_audio"])
    out = json.loads((kedro_project / "data/07_model_output/sortformer/audio_check.json")
                     .read_text())
    assert out["source"] == {"path": str(wav), "rttm": str(rttm), "sample_rate": sr}
    assert out["duration_s"] == pytest.approx(6.0) and out["reference_speakers"] == 2
    assert set(out["per_seed"]["hybrid"]) == {"seed_0", "seed_1"}
    for variant in ("pil", "sort", "hybrid", "clustering"):
        assert set(out["mean"][variant]) == {"n_segments", "n_speakers", "der_c025", "der_c0",
                                             "first_output_error_s", "channel0_onset_error_s"}
        assert out["mean"][variant]["der_c025"] >= 0.0
    assert out["rttm"]["clustering"] == "" or out["rttm"]["clustering"].startswith("SPEAKER ")


def _tree(kedro_project):
    from kedro.config import OmegaConfigLoader

    loader = OmegaConfigLoader(str(kedro_project / "conf"), base_env="base", default_run_env="test",
                               merge_strategy={"parameters": "soft"})
    return loader["parameters"]["sortformer"]


@pytest.mark.parametrize(("path", "value", "message"), [
    (("model", "d_model"), 31, "sortformer.model"),
    (("sim", "count_weights"), [0.1] * 7, "sortformer.sim.count_weights"),

    (("speakers", "test_variants"), ["m1"], "sortformer.speakers"),
    (("optim", "lr"), -1.0, "sortformer.optim.lr"),
    (("msasr", "model", "inject_at"), "decoder", "sortformer.msasr.model.inject_at"),
    (("seeds",), [0, 0], "sortformer.seeds"),
])
def test_bad_parameters_are_refused_with_their_full_key(kedro_project, path, value, message,
                                                        assert_refused):
    assert_refused(SortformerParams, _tree(kedro_project), "sortformer", path, value,
                   message.replace(".", r"\."))


def test_bad_parameters_stop_the_run_before_any_node(kedro_project, run_pipeline):
    with pytest.raises(Exception, match=r"sortformer\.optim\.epochs"):
        run_pipeline("sortformer", env="test", params={"sortformer": {"optim": {"epochs": 0}}})
    assert not (kedro_project / "data/01_raw/sortformer").exists()


def test_new_parameters_are_refused_with_their_key(kedro_project, tmp_path, assert_refused):
    """One loaded tree, each bad value in turn (loading the tree is the slow part)."""
    import copy

    wav = tmp_path / "meeting.wav"
    wav.write_bytes(b"")
    base = _tree(kedro_project)
    cases = [
        (("sim", "count_weights"), [0.2] * 5, "sim.count_weights has 5 speaker counts but the "
                                              "model has 4 outputs"),
        (("max_speakers",), 7, "sortformer.max_speakers"),
        (("sim", "swap_augment"), 1.5, "sortformer.sim.swap_augment"),
        (("sim", "n_train_empty"), -1, "sortformer.sim.n_train_empty"),
        (("sim", "swap_pairs"), [0, 3], r"swap_pairs: got \[0, 3\]"),
        (("sim", "swap_pairs"), [0, 0], r"swap_pairs: got \[0, 0\]"),
        (("robustness", "probe_levels_db"), [10.0], "sortformer.robustness"),
        (("postprocessing", "vad_gate", "threshold_db"), 0.0,
         "sortformer.postprocessing.vad_gate.threshold_db"),
        (("postprocessing", "vad_gate", "floor_quantile"), 1.0,
         "sortformer.postprocessing.vad_gate.floor_quantile"),
        (("postprocessing", "vad_gate", "n_bands"), 0, "sortformer.postprocessing.vad_gate.n_bands"),
        (("audio_check", "path"), "/nonexistent/meeting.wav", "no such file"),
        (("audio_check", "path"), str(tmp_path), "no such file"),
        (("audio_check", "rttm"), str(wav), "rttm is given without path"),
    ]
    for path, value, message in cases:
        assert_refused(SortformerParams, copy.deepcopy(base), "sortformer", path, value,
                       message.replace(".", r"\."))
    tree = copy.deepcopy(base)
    tree["audio_check"] |= {"path": str(wav), "rttm": str(wav)}
    with pytest.raises(ParameterError, match=r"sortformer\.audio_check.*rttm.*not a \.rttm"):
        validate_parameters(SortformerParams, tree, "sortformer")
