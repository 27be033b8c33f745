"""The compute-scaling study (pipeline wavetoken_scaling): FLOPs, fits, claims, resuming."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from icml25.pipelines.wavetoken import scaling


class _TwoLayers(torch.nn.Module):
    def __init__(self, d_in: int, d_hidden: int, d_out: int) -> None:
        super().__init__()
        self.a = torch.nn.Linear(d_in, d_hidden, bias=False)
        self.b = torch.nn.Linear(d_hidden, d_out, bias=False)

    def loss(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x))).square().mean()


def test_train_step_flops_counts_forward_and_backward_matmuls():
    """A bias-free MLP: forward 2·B·(in·h + h·out); backward twice that, except that the
    first layer's input needs no gradient (a leaf without requires_grad)."""
    batch, d_in, d_h, d_out = 8, 5, 7, 3
    model = _TwoLayers(d_in, d_h, d_out)
    flops = scaling.train_step_flops(model, (torch.randn(batch, d_in),))
    forward = 2 * batch * (d_in * d_h + d_h * d_out)
    backward = 2 * batch * (d_in * d_h + 2 * d_h * d_out)  # weight grads + one input grad
    assert flops == forward + backward
    assert all(p.grad is None for p in model.parameters())


def test_crossing_flops_recovers_a_known_power_law():
    flops = np.array([1e10, 1e11, 1e12, 1e13])
    log_rel = 1.2 - 0.3 * (np.log10(flops) - 10)  # reaches 0 at 10^14
    fit = scaling.crossing_flops(flops, log_rel)
    assert fit["slope_per_decade"] == pytest.approx(-0.3)
    assert fit["crossing_flops"] == pytest.approx(1e14, rel=1e-9)
    assert fit["r2"] == pytest.approx(1.0)
    assert scaling.crossing_flops(flops, 0.5 + 0.01 * np.arange(4))["crossing_flops"] == np.inf
    with pytest.raises(ValueError, match="two or more distinct budgets"):
        scaling.crossing_flops([1e10, 1e10], [0.1, 0.2])


def test_gain_is_the_change_of_each_datasets_log_ratio():
    units = {"w@l": {"log_rel_wql_real": {"a": [0.1, 0.3], "b": [0.0, 0.2]}},
             "w@s": {"log_rel_wql_real": {"a": [0.5, 0.4], "b": [0.1, 0.1]}}}
    gain = scaling.scaling_gain(units, "w", "l", "s")
    assert gain == {"a": pytest.approx([-0.4, -0.1]), "b": pytest.approx([-0.1, 0.1])}


def test_scaling_pipeline_end_to_end_and_resumes_from_its_cache(kedro_project, run_pipeline):
    run_pipeline("wavetoken_scaling")
    out = kedro_project / "data/08_reporting/wavetoken_scaling"
    table = pd.read_csv(out / "scaling.csv")
    # conf/test: two tokenizers x two budgets x two seeds
    assert len(table) == 8
    assert set(table["variant"]) == {"wavetoken@xs", "wavetoken@s", "chronos_bins_1024@xs",
                                     "chronos_bins_1024@s"}
    assert (table["train_flops"] == table["step_flops"] * table["steps"]).all()
    by_budget = table.groupby("budget")["train_flops"].mean()
    assert by_budget["s"] > by_budget["xs"] > 0
    metrics = json.loads((out / "metrics.json").read_text())
    assert (metrics["largest"], metrics["smallest"]) == ("s", "xs")
    for tok in ("wavetoken", "chronos_bins_1024"):
        fit = metrics["extrapolation"][tok]
        assert len(fit["crossing_flops_per_seed"]) == 2
        assert np.isfinite(fit["slope_per_decade"])
        # the per-run agg-relative WQL is the geometric mean of the per-dataset ratios
        scores = pd.read_csv(out / "scores.csv")
        naive = scores[scores["variant"] == "seasonal_naive"].set_index("dataset")["wql"]
        mine = scores[(scores["variant"] == f"{tok}@s") & (scores["seed"] == 0)]
        expected = np.exp(np.mean(np.log(mine.set_index("dataset")["wql"] / naive[mine["dataset"]])))
        row = table[(table["variant"] == f"{tok}@s") & (table["seed"] == 0)].iloc[0]
        assert row["agg_rel_wql_real"] == pytest.approx(expected)
    claims = json.loads((out / "claims.json").read_text())
    assert claims["pipeline"] == "wavetoken_scaling" and claims["n_claims"] == 2
    for claim in claims["claims"]:
        assert claim["verdict"] in ("holds", "fails", "inconclusive")
        assert claim["unit"] == "dataset" and claim["n_seeds"] == 2
    assert (out / "figures/scaling.png").stat().st_size > 10_000

    # a second run reads every finished run back from the cache: identical forecasts
    cache = kedro_project / "data/07_model_output/wavetoken_scaling/cache"
    cached = sorted(p.name for p in cache.glob("*.parquet"))
    assert len(cached) == 8
    before = pd.read_csv(out / "scaling.csv")
    run_pipeline("wavetoken_scaling")
    after = pd.read_csv(out / "scaling.csv")
    pd.testing.assert_frame_equal(before, after)
    assert sorted(p.name for p in cache.glob("*.parquet")) == cached
