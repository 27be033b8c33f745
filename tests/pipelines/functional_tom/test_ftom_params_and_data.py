"""Bad parameters fail before any work with their full key; bad logs get a clear error."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from icml25.core.params import ParameterError, validate_parameters
from icml25.pipelines.functional_tom.params import FunctionalTomParams
from icml25.pipelines.functional_tom.scoring import agent_metrics, score_episodes

ROOT = Path(__file__).resolve().parents[3]
BASE = yaml.safe_load((ROOT / "conf/base/parameters_functional_tom.yml").read_text())[
    "functional_tom"]


def _with(path: str, value):
    tree = copy.deepcopy(BASE)
    node = tree
    *parents, last = path.split(".")
    for part in parents:
        node = node[part]
    node[last] = value
    return tree


def test_base_parameters_validate():
    p = validate_parameters(FunctionalTomParams, BASE, "functional_tom")
    assert p.horizon == 100 and p.reference.rmax.m == 1 and len(p.seeds) == 5


@pytest.mark.parametrize("path, value, key", [
    ("horizon", 0, "functional_tom.horizon"),
    ("reference.rmax.gamma", 1.0, "functional_tom.reference.rmax.gamma"),
    ("reference.agents", ["oracle", "psychic"], "functional_tom.reference.agents.1"),
    ("meta.heads", 3, "functional_tom.meta"),
    ("meta.device", "tpu", "functional_tom.meta.device"),
    ("meta.train_families", ["single", "wsls"], "functional_tom.meta"),
    ("meta.games", ["chess"], "functional_tom"),
    ("llm.strategies", ["telepathy"], "functional_tom.llm.strategies"),
    ("llm.backend", "hf", "functional_tom.llm"),
    ("llm.invalid_policy", "skip", "functional_tom.llm.invalid_policy"),
    ("games.ipd.payoff", [[8, 0, 1], [10, 5, 1]], "functional_tom.games.ipd"),
    ("games.rps.actions", ["Rock", "rock", "Paper"], "functional_tom.games.rps"),
    ("seeds", [0, 0], "functional_tom.seeds"),
    ("tft_first_move", 2, "functional_tom"),
    ("paper_tabular_regret", {"ipd": {"grim": 0.1}}, "functional_tom"),
    ("surprise", 1, "functional_tom.surprise"),
])
def test_bad_parameters_name_the_full_key(path, value, key):
    with pytest.raises(ParameterError) as err:
        validate_parameters(FunctionalTomParams, _with(path, value), "functional_tom")
    assert key in str(err.value)


def _frames(n_rounds=3, horizon=3):
    scenarios = pd.DataFrame({"scenario_id": [0], "suite": ["paper"], "seed": [0],
                              "game": ["rps"], "family": ["single"], "episode": [0],
                              "episode_seed": [1], "horizon": [horizon],
                              "partner": ['{"action": 0, "family": "single"}']})
    optimal = pd.DataFrame({"scenario_id": [0], "v_star": [3.0], "v_min": [-3.0],
                            "closed_form": [1.0]})
    logs = pd.DataFrame({"scenario_id": 0, "agent": "x", "t": np.arange(1, n_rounds + 1),
                         "a": 1, "b": 0, "r": 1.0, "bhat": 0, "p_b": 0.9, "r_star": 1.0,
                         "r_tom": 1.0, "invalid": False, "invalid_prediction": False})
    return logs, scenarios, optimal


def test_scoring_known_values():
    logs, scenarios, optimal = _frames()
    logs.loc[0, ["a", "r", "bhat", "r_tom"]] = [0, 0.0, 2, -1.0]
    scores = score_episodes(logs, scenarios, optimal)
    row = scores.iloc[0]
    assert row["regret"] == pytest.approx(1 / 3)
    assert row["tom_regret"] == pytest.approx(2 / 3)
    assert row["tom_accuracy"] == pytest.approx(2 / 3)
    assert row["gap"] == pytest.approx(-1 / 3)
    metrics = agent_metrics(scores, {"rps": {"single": 0.083}})
    assert metrics["x"]["paper.rps.single.regret"] == [pytest.approx(1 / 3)]
    assert metrics["x"]["paper_tabular_max_abs_dev"] == [pytest.approx(1 / 3 - 0.083)]


def test_bad_logs_get_clear_errors():
    logs, scenarios, optimal = _frames()
    bad = logs.copy()
    bad.loc[1, "r"] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        score_episodes(bad, scenarios, optimal)
    with pytest.raises(ValueError, match="empty"):
        score_episodes(logs.iloc[:0], scenarios, optimal)
    with pytest.raises(ValueError, match="lack columns"):
        score_episodes(logs.drop(columns=["r_tom"]), scenarios, optimal)
    with pytest.raises(ValueError, match="fewer rounds"):
        score_episodes(_frames(n_rounds=2)[0], scenarios, optimal)
    with pytest.raises(ValueError, match="without an optimal value"):
        score_episodes(logs, scenarios, optimal.assign(scenario_id=[5]))
