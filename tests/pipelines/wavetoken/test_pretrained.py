"""Local Chronos checkpoints: loader errors and equality with chronos-forecasting's pipeline.

A tiny randomly initialised T5 (d_model 16, 1 + 1 layers, vocabulary 128) with a
``chronos_config`` is saved with ``save_pretrained``; our loader and
``chronos.ChronosPipeline.from_pretrained`` read the same folder. Nothing is downloaded.
"""

from __future__ import annotations

import json
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # before transformers is imported

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers")
chronos = pytest.importorskip("chronos")

from icml25.pipelines.wavetoken.bin_tokenizer import MeanScaleUniformBins  # noqa: E402
from icml25.pipelines.wavetoken.pretrained import (  # noqa: E402
    ChronosCheckpointConfig,
    ChronosT5Model,
    fit_context_width,
    forecast_checkpoint,
    load_chronos_checkpoint,
    read_chronos_config,
)

CONTEXT_LENGTH = 24
PREDICTION_LENGTH = 8
CHRONOS_CONFIG = {
    "tokenizer_class": "MeanScaleUniformBins",
    "tokenizer_kwargs": {"low_limit": -15.0, "high_limit": 15.0},
    "context_length": CONTEXT_LENGTH,
    "prediction_length": PREDICTION_LENGTH,
    "n_tokens": 128,
    "n_special_tokens": 2,
    "pad_token_id": 0,
    "eos_token_id": 1,
    "use_eos_token": True,
    "model_type": "seq2seq",
    "num_samples": 4,
    "temperature": 1.0,
    "top_k": 50,
    "top_p": 1.0,
}


@pytest.fixture(autouse=True)
def _offline(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("TRANSFORMERS_OFFLINE", "1")


def save_tiny_checkpoint(folder, chronos_config=CHRONOS_CONFIG, pad_boost=0.0):
    config = transformers.T5Config(
        vocab_size=128, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_decoder_layers=1,
        num_heads=2, feed_forward_proj="relu", pad_token_id=0, eos_token_id=1,
        decoder_start_token_id=0,
    )
    config.chronos_config = dict(chronos_config)
    torch.manual_seed(0)
    model = transformers.T5ForConditionalGeneration(config)
    with torch.no_grad():  # unit-variance weights: greedy ids then depend on the context
        for p in model.parameters():
            p.normal_(0.0, 1.0)
        # a larger PAD embedding (tied to the output layer) makes greedy decoding pick PAD
        row = model.shared.weight[0]
        row += pad_boost * row.sign()
    model.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    return save_tiny_checkpoint(tmp_path_factory.mktemp("chronos") / "tiny-chronos")


@pytest.fixture(scope="module")
def pad_prone_checkpoint(tmp_path_factory):
    """Greedy decoding emits PAD at ~25 % of steps; Chronos suppresses nothing but EOS (until
    ``min_new_tokens``) and decodes PAD to the lowest centre, and so must we."""
    folder = tmp_path_factory.mktemp("chronos") / "pad-prone"
    return save_tiny_checkpoint(folder, pad_boost=1.5)


def contexts(width):
    rng = np.random.default_rng(0)
    x = 5.0 + np.cumsum(rng.normal(size=(5, width)), axis=1)
    x[1, : width // 3] = np.nan  # shorter history
    x[2, [4, 11]] = np.nan  # missing values
    x[3] *= 1e3
    x[4] = np.abs(x[4]) * 1e-3
    return x


def test_loader_returns_model_tokenizer_and_config(checkpoint):
    model, tokenizer, cfg = load_chronos_checkpoint(checkpoint)
    assert isinstance(model, ChronosT5Model) and not model.training
    assert isinstance(cfg, ChronosCheckpointConfig)
    assert (cfg.context_length, cfg.prediction_length, cfg.n_tokens) == (24, 8, 128)
    assert isinstance(tokenizer, MeanScaleUniformBins)
    assert tokenizer.get_params() == {
        "vocab_size": 128, "limits": (-15.0, 15.0), "scaling": "mean", "context_length": 24
    }
    # the same tokenizer as chronos-forecasting's for this config
    theirs = chronos.ChronosConfig(**CHRONOS_CONFIG).create_tokenizer()
    np.testing.assert_array_equal(tokenizer.centres, theirs.centers.numpy())
    assert next(model.parameters()).dtype == torch.float32


@pytest.mark.parametrize("which", ["checkpoint", "pad_prone_checkpoint"])
@pytest.mark.parametrize("width", [20, 30])  # padded to / cut at context_length 24
@pytest.mark.parametrize("horizon", [5, 19])  # inside one block of 8 / three blocks
def test_greedy_forecasts_equal_chronos_pipeline(request, which, width, horizon):
    checkpoint = request.getfixturevalue(which)
    x = contexts(width)
    ours = forecast_checkpoint(checkpoint, x, horizon=horizon, n_samples=2, top_k=1, seed=3)
    pipe = chronos.ChronosPipeline.from_pretrained(str(checkpoint))
    theirs = pipe.predict(
        torch.tensor(x, dtype=torch.float32), prediction_length=horizon, num_samples=2,
        temperature=1.0, top_k=1, top_p=1.0,
    ).numpy()
    assert ours.shape == theirs.shape == (5, 2, horizon)
    scale = np.nanmean(np.abs(x[:, -CONTEXT_LENGTH:]), axis=1)[:, None, None]
    # Chronos returns float32 centre * scale; ours is the float64 product: relative 1.2e-7
    error = np.abs(ours - theirs) / np.maximum(scale, np.abs(theirs))
    assert error.max() <= 1e-6, (error.max(), np.argwhere(error > 1e-6)[:5].tolist())
    # the test has teeth: many different bins are used, and PAD where it is likely
    assert np.unique(np.round(ours[:, 0] / scale[:, 0], 4)).size >= 8
    lowest = np.isclose(ours / scale, -15.0, rtol=1e-5).mean()
    if which == "checkpoint":
        assert (ours[:, 0].std(axis=1) > 0).all() and lowest < 0.05
    else:
        assert lowest > 0.0


def test_sampling_is_seeded_and_samples_differ(checkpoint):
    x = contexts(24)
    a = forecast_checkpoint(checkpoint, x, horizon=8, n_samples=6, seed=1)
    b = forecast_checkpoint(checkpoint, x, horizon=8, n_samples=6, seed=1)
    c = forecast_checkpoint(checkpoint, x, horizon=8, n_samples=6, seed=2)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert (a.std(axis=1) > 0).any()
    # defaults come from the checkpoint: num_samples 4
    assert forecast_checkpoint(checkpoint, x, horizon=3).shape == (5, 4, 3)


def test_fit_context_width():
    x = np.arange(6.0).reshape(1, 6)
    np.testing.assert_array_equal(fit_context_width(x, 4), [[2.0, 3.0, 4.0, 5.0]])
    padded = fit_context_width(x, 8)
    assert np.isnan(padded[0, :2]).all() and np.array_equal(padded[0, 2:], x[0])
    with pytest.raises(ValueError, match="2-D"):
        fit_context_width(np.arange(3.0), 4)


# ----------------------------------------------------------------------------- bad folders
def _copy_with_config(src, dst, edit):
    dst.mkdir()
    for name in os.listdir(src):
        (dst / name).write_bytes((src / name).read_bytes())
    config = json.loads((dst / "config.json").read_text())
    edit(config)
    (dst / "config.json").write_text(json.dumps(config))
    return dst


def test_missing_folder_and_config(tmp_path):
    missing = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match=r"nowhere.*no such folder"):
        load_chronos_checkpoint(missing)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match=r"empty.*no config.json"):
        load_chronos_checkpoint(empty)
    (empty / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"empty.*not readable JSON"):
        read_chronos_config(empty)


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda c: c.pop("chronos_config"), "no 'chronos_config'"),
        (lambda c: c["chronos_config"].update(tokenizer_class="MeanScaleLogBins"),
         "tokenizer_class 'MeanScaleLogBins' is not supported"),
        (lambda c: c["chronos_config"].update(model_type="causal"),
         "model_type 'causal' is not supported"),
        (lambda c: c["chronos_config"].pop("context_length"), "lacks \\['context_length'\\]"),
        (lambda c: c["chronos_config"].update(use_eos_token=False), "use_eos_token"),
        (lambda c: c["chronos_config"].update(pad_token_id=1, eos_token_id=0), "pad_token_id=0"),
        (lambda c: c.update(model_type="bart"), "model_type 'bart' is not 't5'"),
    ],
)
def test_bad_configs_name_the_folder(checkpoint, tmp_path, edit, message):
    bad = _copy_with_config(checkpoint, tmp_path / "bad-ckpt", edit)
    with pytest.raises(ValueError, match=rf"bad-ckpt.*{message}"):
        load_chronos_checkpoint(bad)


def test_missing_and_corrupt_weights(checkpoint, tmp_path):
    no_weights = _copy_with_config(checkpoint, tmp_path / "no-weights", lambda c: None)
    (no_weights / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match=r"no-weights.*no weights file"):
        load_chronos_checkpoint(no_weights)
    corrupt = _copy_with_config(checkpoint, tmp_path / "corrupt", lambda c: None)
    data = (corrupt / "model.safetensors").read_bytes()
    (corrupt / "model.safetensors").write_bytes(data[: len(data) // 3])
    with pytest.raises(ValueError, match=r"corrupt.*weights could not be loaded"):
        load_chronos_checkpoint(corrupt)
    (corrupt / "model.safetensors").write_bytes(b"\x00" * 64)
    with pytest.raises(ValueError, match=r"corrupt.*weights could not be loaded"):
        load_chronos_checkpoint(corrupt)



def test_a_local_checkpoint_and_a_user_table_join_the_run(checkpoint, kedro_project,
                                                          run_pipeline):
    """One `kedro run` (conf/test) with `wavetoken.pretrained.path` set and a CSV dropped into
    the test tree's 01_raw/user/wavetoken, named in the zero-shot list: the checkpoint forecasts
    every test window with its own context length 24 and blocks of 8 and is scored like every
    variant, and the user's series become test windows like every shipped dataset's."""
    import pandas as pd

    from icml25.pipelines.wavetoken.frames import frame_to_eval_sets

    folder = kedro_project / "data/01_raw/user/wavetoken"
    folder.mkdir(parents=True, exist_ok=True)
    y = 100 + 10 * np.sin(np.arange(90) * 2 * np.pi / 12)
    pd.DataFrame({"item_id": np.repeat(["store_1", "store_2"], 90),
                  "timestamp": np.tile(pd.date_range("2001-01-01", periods=90, freq="MS"), 2),
                  "target": np.concatenate([y, 2 * y])}).to_csv(folder / "my_sales.csv",
                                                                 index=False)
    try:
        run_pipeline("wavetoken", params={"wavetoken": {
            "pretrained": {"path": str(checkpoint), "name": "tiny_chronos"},
            "data": {"zero_shot": ["m1_yearly", "airline", "my_sales"],
                     "datasets": {"my_sales": {"horizon": 12}}}}})
    finally:
        (folder / "my_sales.csv").unlink()
    out = kedro_project / "data/08_reporting/wavetoken"
    sets = {s.name: s for s in frame_to_eval_sets(pd.read_parquet(
        kedro_project / "data/05_model_input/wavetoken/evaluation_sets.parquet"))}
    mine = sets["my_sales"]
    assert (mine.group, mine.horizon, mine.season) == ("zero_shot", 12, 12)
    np.testing.assert_allclose(mine.futures, np.stack([y[-12:], 2 * y[-12:]]))
    metrics = json.loads((out / "metrics.json").read_text())
    assert np.isfinite(metrics["metrics"]["tiny_chronos"]["agg_rel_wql_real"])
    scores = pd.read_csv(out / "scores.csv")
    assert set(scores.loc[scores["variant"] == "tiny_chronos", "dataset"]) == set(
        scores.loc[scores["variant"] == "wavetoken", "dataset"])
    assert set(scores.loc[scores["dataset"] == "my_sales", "variant"]) >= {
        "wavetoken", "chronos_bins_1024", "seasonal_naive", "tiny_chronos"}
    forecasts = pd.read_parquet(
        kedro_project / "data/07_model_output/wavetoken/pretrained_forecasts.parquet")
    assert set(forecasts["variant"]) == {"tiny_chronos"} and (forecasts["seed"] == 0).all()
