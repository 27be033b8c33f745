"""The dry run's recorder of training steps, its step formula and its report."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from icml25.core.paper_check import (
    TrainingStepRecorder,
    count_from_parameters,
    generator_throughput,
    paper_report,
)


def _train(steps: int, batch: int, model: nn.Module | None = None) -> nn.Module:
    model = model or nn.Sequential(nn.Linear(6, 10), nn.ReLU(), nn.Linear(10, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(steps):
        with torch.no_grad():  # an evaluation call: not a training step
            model(torch.randn(50, 6))
        loss = model(torch.randn(batch, 6)).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model


def test_the_recorder_counts_steps_and_measures_the_first_one():
    with TrainingStepRecorder() as recorder:
        _train(3, batch=4)
        _train(2, batch=4)  # the same model shape again: one entry, two optimizers
    (entry,) = recorder.models.values()
    assert entry["dry_run_steps"] == 5 and entry["optimizers"] == 2
    assert entry["model"] == "Sequential" and entry["parameters"] == 6 * 10 + 10 + 10 * 3 + 3
    assert entry["forward_flops"] == 2 * 4 * (6 * 10 + 10 * 3)
    assert entry["backward_flops"] == 2 * 4 * (6 * 10 + 10 * 3) + 2 * 4 * 10 * 3
    # outside the block torch's global hooks are gone
    _train(1, batch=4)
    assert entry["dry_run_steps"] == 5


def test_the_recorder_measures_at_the_paper_batch():
    with TrainingStepRecorder(batch=(4, 256)) as recorder:
        _train(1, batch=4)
    (entry,) = recorder.models.values()
    assert entry["forward_flops"] == 2 * 256 * (6 * 10 + 10 * 3)
    assert "paper's batch 256" in entry["method"]


class _Checked(nn.Module):
    """A linear layer whose forward checks its input: data-dependent, so no meta kernel can
    answer it and the step is measured on the CPU."""

    def __init__(self, n_in: int, n_out: int) -> None:
        super().__init__()
        self.lin = nn.Linear(n_in, n_out)

    def forward(self, x):
        if float(x.abs().max()) > 1e6:
            raise ValueError("too large")
        return self.lin(x)


def test_a_module_that_cannot_run_on_meta_is_scaled_from_the_dry_batch():
    with TrainingStepRecorder(batch=(4, 256)) as recorder:
        _train(1, batch=4, model=_Checked(6, 3))
    (entry,) = recorder.models.values()
    assert entry["forward_flops"] == 2 * 256 * 6 * 3
    assert entry["method"].startswith("computed:") and "× 256/4" in entry["method"]


def test_count_from_parameters():
    tree = {"seeds": [0, 1, 2], "train": {"steps": 100}, "ablations": ["a", "b"], "n": None}
    assert count_from_parameters(["train.steps", "seeds", [4, "ablations"]], tree, "w") == 1800
    assert count_from_parameters([], tree, "w") == 1
    assert count_from_parameters(["n"], tree, "w") == 0
    with pytest.raises(KeyError, match=r"w: no parameter 'train.epochs' \(at 'epochs'\)"):
        count_from_parameters(["train.epochs"], tree, "w")
    with pytest.raises(TypeError, match="a factor is"):
        count_from_parameters([True], tree, "w")


def test_the_report_checks_its_formula_against_the_dry_run():
    models = [{"parameters": 10, "activation_bytes": 8, "flops": 100.0, "dry_run_steps": 2,
               "method": "measured"}]
    spec = {"steps": ["train.steps"], "runs": ["seeds"]}
    paper = {"train": {"steps": 1000}, "seeds": [0, 1, 2]}
    dry = {"train": {"steps": 2}, "seeds": [0]}
    report = paper_report("room", models, spec, paper, dry, wall_seconds=1.0,
                          peak_rss_bytes=1, layers=["base", "paper", "paper_check"],
                          unmeasured=[])
    assert report["paper"]["steps"] == 3000
    assert report["paper"]["steps_formula_matches_dry_run"] is True
    assert report["h100"]["seconds"] == pytest.approx(3000 * 100 / (0.4 * 989e12))
    dry["seeds"] = [0, 1]
    report = paper_report("room", models, spec, paper, dry, wall_seconds=1.0, peak_rss_bytes=1,
                          layers=[], unmeasured=[])
    assert report["paper"]["steps_formula_matches_dry_run"] is False


def test_the_report_lists_each_unmeasured_problem_once_with_its_count():
    problems = ["LBFGS: no forward call", "Net: meta failed", "LBFGS: no forward call",
                "LBFGS: no forward call"]
    report = paper_report("room", [], None, {}, {}, wall_seconds=1.0, peak_rss_bytes=1,
                          layers=[], unmeasured=problems)
    assert report["unmeasured"] == ["LBFGS: no forward call (× 3)", "Net: meta failed"]
    assert problems[2] == "LBFGS: no forward call"  # the recorder's own list is left as it was


def test_generator_throughput_extrapolates_linearly():
    out = generator_throughput("room", {"make": ["n"]}, {"n": 36_000}, {"n": 10},
                               {"room.make": 2.0})
    assert out["make"]["items_per_second"] == 5.0
    assert out["make"]["paper_seconds_one_core"] == 7200.0
    assert out["make"]["over_one_hour"] is True
    assert "did not run" in generator_throughput("room", {"other": ["n"]}, {"n": 1}, {"n": 1},
                                                 {})["other"]["note"]


def test_ceil_div_first_and_bools():
    tree = {"data": {"max_train": None}, "train": {"batch_size": 256, "epochs": 70},
            "on": True, "off": False}
    batches = {"ceil_div": [{"first": ["data.max_train", 3600]}, "train.batch_size"]}
    assert count_from_parameters(["train.epochs", batches], tree, "w") == 70 * 15
    tree["data"]["max_train"] = 32
    assert count_from_parameters([batches], tree, "w") == 1
    assert count_from_parameters([[1, "on", "off"]], tree, "w") == 2
    with pytest.raises(ValueError, match="every entry of first"):
        count_from_parameters([{"first": ["data.max_test"]}], {"data": {"max_test": None}}, "w")


def test_product_of_a_fraction():
    tree = {"frac": 0.04, "batch": 8}
    assert count_from_parameters([{"ceil_div": [{"product": [5000, "frac"]}, "batch"]}], tree,
                                 "w") == 25
    assert count_from_parameters([{"product": [5000, "frac"]}], tree, "w") == 200


def test_a_step_under_cpu_autocast_is_measured_under_it():
    model = _Checked(64, 64)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with TrainingStepRecorder() as recorder:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = model(torch.randn(8, 64)).float().square().mean()
        loss.backward()
        opt.step()
    (entry,) = recorder.models.values()
    assert entry["dtype"] == "bfloat16" and "bfloat16 autocast" in entry["method"]
    # the Linear saves its bf16 input copy (8×64×2 bytes): half of what float32 would save
    assert entry["activation_bytes"] == 8 * 64 * 2


def test_a_network_called_whole_and_layer_by_layer_counts_its_parameters_once():
    model = nn.Sequential(nn.Linear(6, 10), nn.ReLU(), nn.Linear(10, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with TrainingStepRecorder() as recorder:
        x = torch.randn(4, 6)
        whole = model(x).square().mean()
        layered = model[2](model[1](model[0](x))).square().mean()  # as bound propagation does
        (whole + layered).backward()
        opt.step()
    (entry,) = recorder.models.values()
    assert entry["parameters"] == 6 * 10 + 10 + 10 * 3 + 3 and entry["calls_per_step"] == 3
    assert entry["forward_flops"] == 2 * 2 * 4 * (6 * 10 + 10 * 3)


def test_micro_batched_steps_scale_flops_and_keep_one_micro_batch_of_activations():
    # the shared loop with gradient accumulation: batch 8 in 2 micro-batches of 4, measured at
    # the paper's micro-batch of 32; the paper's step is 8 micro-batches (batch 256)
    from icml25.core.training import TrainLoopConfig, train

    model = nn.Sequential(nn.Linear(6, 10), nn.ReLU(), nn.Linear(10, 3))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with TrainingStepRecorder(batch=(4, 32)) as recorder:
        train(model, opt, lambda step: torch.randn(8, 6), lambda m, x: m(x).square().mean(),
              TrainLoopConfig(steps=2, progress=False, micro_batches=2))
    (entry,) = recorder.models.values()
    assert entry["calls_per_step"] == 2 and entry["dry_run_steps"] == 2
    one_call = 2 * 32 * (6 * 10 + 10 * 3)
    assert entry["forward_flops"] == 2 * one_call
    entry["flops"] = entry["forward_flops"] + entry["backward_flops"]
    spec = {"steps": ["train.steps"], "micro_batches": ["train.micro_batches"],
            "batch": [{"ceil_div": ["train.batch_size", "train.micro_batches"]}]}
    paper = {"train": {"steps": 100, "batch_size": 256, "micro_batches": 8}}
    dry = {"train": {"steps": 2, "batch_size": 8, "micro_batches": 2}}
    report = paper_report("room", [entry], spec, paper, dry, wall_seconds=1.0,
                          peak_rss_bytes=1, layers=[], unmeasured=[])
    assert report["per_step"]["flops"] == pytest.approx(entry["flops"] * 4)   # 8 of 32 each
    assert report["per_step"]["flops"] == pytest.approx(
        2 * 256 * (6 * 10 + 10 * 3) + 2 * 256 * (6 * 10 + 10 * 3) + 2 * 256 * 10 * 3)
    assert report["per_step"]["activation_bytes"] == entry["activation_bytes"] / 2
    assert report["h100"]["memory_bytes"] == pytest.approx(
        entry["parameters"] * 16 + entry["activation_bytes"] / 2)
    assert report["paper"]["steps_formula_matches_dry_run"] is True
