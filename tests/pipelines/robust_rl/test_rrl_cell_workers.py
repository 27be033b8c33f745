"""robust_rl's tabular planning and evaluation over (environment, set) cells in worker
processes (``tabular.n_workers``): the same tables as one process, and bad counts refused."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import yaml
from omegaconf import OmegaConf

from icml25.core.params import ParameterError
from icml25.pipelines.robust_rl import nodes

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def params():
    base = yaml.safe_load((ROOT / "conf/base/parameters_robust_rl.yml").read_text())
    test = yaml.safe_load((ROOT / "conf/test/parameters_robust_rl.yml").read_text())
    merged = OmegaConf.to_container(OmegaConf.merge(base, test))["robust_rl"]
    # two sets of kinds whose cells differ in cost, so the workers finish out of order
    merged["uncertainty"] = [{"type": "tv", "radius": 0.4}, {"type": "kl", "radius": 0.05},
                             {"type": "contamination", "radius": 0.2}]
    merged["seeds"] = [0]
    return merged


def _with_workers(params, n: int) -> dict:
    return params | {"tabular": params["tabular"] | {"n_workers": n}}


def test_planning_and_evaluation_do_not_depend_on_the_number_of_workers(params):
    models = nodes.make_envs(params)
    empirical = nodes.sample_models(models, params)
    truth = nodes.compute_ground_truth(models, params)
    serial = nodes.plan_policies(models, empirical, _with_workers(params, 1))
    assert len(serial) and serial["set"].nunique() == 3 and serial["env"].nunique() == 2
    for n in (2, 4):
        pd.testing.assert_frame_equal(nodes.plan_policies(models, empirical,
                                                          _with_workers(params, n)), serial)
    gaps = nodes.evaluate_policies(serial, models, truth, _with_workers(params, 1))
    pd.testing.assert_frame_equal(
        nodes.evaluate_policies(serial, models, truth, _with_workers(params, 3)), gaps)


def test_a_negative_worker_count_is_refused_with_its_key(params):
    with pytest.raises(ParameterError, match=r"robust_rl\.tabular\.n_workers"):
        nodes._params(_with_workers(params, -1))
