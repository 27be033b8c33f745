"""From per-round episode logs to the benchmark's metrics (docs/papers/functional_tom.md).

Per episode: Delta_F / T = (V*_T - sum_t r_t) / T, Delta_ToM / T, literal ToM accuracy, log-loss
and the invalid-answer rate. Per (suite, game, partner family, agent, seed): the mean over that
seed's episodes; claims use the mean over seeds, the spread over seeds is reported beside it,
and the standard error over all episodes of a cell is in the cell table.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from icml25.pipelines.functional_tom.partners import DETERMINISTIC

STATS = ("regret", "tom_regret", "tom_accuracy", "gap", "log_loss", "invalid_rate")
AGGREGATES = ("max_abs_regret_deterministic", "closed_form_max_z", "paper_tabular_max_abs_dev")


def score_episodes(logs: pd.DataFrame, scenarios: pd.DataFrame, optimal: pd.DataFrame
                   ) -> pd.DataFrame:
    """One row per (scenario, agent) with the episode metrics (per step)."""
    required = {"scenario_id", "agent", "t", "a", "b", "r", "bhat", "p_b", "r_star", "r_tom",
                "invalid", "invalid_prediction"}
    missing = sorted(required - set(logs.columns))
    if missing:
        raise ValueError(f"episode logs lack columns {missing}")
    if logs.empty:
        raise ValueError("episode logs are empty: no agent played any episode")
    numeric = logs[["r", "r_star", "r_tom", "p_b"]].to_numpy(dtype=float)
    if not np.all(np.isfinite(numeric)):
        raise ValueError("episode logs contain NaN or infinite rewards / probabilities")
    logs = logs.assign(correct=(logs["bhat"] == logs["b"]).astype(float),
                       nll=-np.log(np.clip(logs["p_b"].to_numpy(float), 1e-12, None)),
                       bad=(logs["invalid"] | logs["invalid_prediction"]).astype(float))
    per = logs.groupby(["scenario_id", "agent"], sort=False).agg(
        rounds=("t", "size"), total_r=("r", "sum"), total_r_star=("r_star", "sum"),
        total_r_tom=("r_tom", "sum"), tom_accuracy=("correct", "mean"),
        log_loss=("nll", "mean"), invalid_rate=("bad", "mean")).reset_index()
    info = scenarios.merge(optimal, on="scenario_id", how="left", validate="one_to_one")
    per = per.merge(info, on="scenario_id", how="left", validate="many_to_one")
    if per["v_star"].isna().any():
        raise ValueError("episode logs reference scenarios without an optimal value")
    short = per["rounds"] != per["horizon"]
    if short.any():
        raise ValueError(f"{int(short.sum())} episodes have fewer rounds than their horizon")
    per["regret"] = (per["v_star"] - per["total_r"]) / per["horizon"]
    per["tom_regret"] = (per["total_r_star"] - per["total_r_tom"]) / per["horizon"]
    per["gap"] = per["regret"] - per["tom_regret"]
    keep = ["scenario_id", "suite", "seed", "game", "family", "episode", "horizon", "partner",
            "agent", "v_star", "v_min", "closed_form", *STATS]
    return per[keep]


def cell_table(scores: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard error over all episodes of each (suite, game, family, agent)."""
    rows = []
    for (suite, game, family, agent), g in scores.groupby(["suite", "game", "family", "agent"]):
        row = {"suite": suite, "game": game, "family": family, "agent": agent, "n": len(g)}
        for stat in STATS:
            x = g[stat].to_numpy(float)
            row[stat] = float(x.mean())
            row[f"{stat}_se"] = float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else 0.0
        rows.append(row)
    return pd.DataFrame(rows)


def _z(x: np.ndarray, reference: np.ndarray) -> float:
    diff = float(x.mean() - reference.mean())
    se = float(x.std(ddof=1) / math.sqrt(len(x))) if len(x) > 1 else 0.0
    if se == 0.0:
        return 0.0 if abs(diff) < 1e-12 else math.inf
    return abs(diff) / se


def agent_metrics(scores: pd.DataFrame, paper_tabular: dict[str, dict[str, float]]
                  ) -> dict[str, dict[str, list[float]]]:
    """``{agent: {metric: [value per seed]}}``; every agent gets every metric name (NaN where it
    did not play a cell) so MLflow lines the variants up.

    Aggregates: ``max_abs_regret_deterministic`` (max over deterministic-partner cells of the
    |mean regret per step|); ``closed_form_max_z`` (max over the paper suite's single-action cells
    of |mean regret - uniform play's closed form| / standard error); ``paper_tabular_max_abs_dev``
    (max over the configured paper cells of |mean regret - the paper's tabular R-Max value|).
    """
    seeds = sorted(scores["seed"].unique())
    cells = sorted({(s, g, f) for s, g, f in scores[["suite", "game", "family"]].itertuples(
        index=False)})
    names = [f"{s}.{g}.{f}.{stat}" for s, g, f in cells for stat in STATS] + list(AGGREGATES)
    out: dict[str, dict[str, list[float]]] = {}
    for agent, by_agent in scores.groupby("agent"):
        values = {n: [math.nan] * len(seeds) for n in names}
        for i, seed in enumerate(seeds):
            mine = by_agent[by_agent["seed"] == seed]
            det, z, dev = [], [], []
            for (suite, game, family), g in mine.groupby(["suite", "game", "family"]):
                for stat in STATS:
                    values[f"{suite}.{game}.{family}.{stat}"][i] = float(g[stat].mean())
                if family in DETERMINISTIC:
                    det.append(abs(float(g["regret"].mean())))
                if suite == "paper" and family == "single":
                    z.append(_z(g["regret"].to_numpy(float), g["closed_form"].to_numpy(float)))
                paper = paper_tabular.get(game, {}).get(family)
                if suite == "paper" and paper is not None:
                    dev.append(abs(float(g["regret"].mean()) - paper))
            n_paper = sum(len(v) for v in paper_tabular.values())
            values["max_abs_regret_deterministic"][i] = max(det) if det else math.nan
            values["closed_form_max_z"][i] = max(z) if z else math.nan
            values["paper_tabular_max_abs_dev"][i] = (max(dev) if dev and len(dev) == n_paper
                                                      else math.nan)
        out[str(agent)] = values
    return out
