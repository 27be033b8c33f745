"""The merge of quantum_rl's seed shards (each agent's ``seeds[k::n]``) back into the tables and
final estimates one loop over agents, environments and seeds writes (the regret claims and
figures read them in that order), and the refusal of shards of another seed list or agent."""

from __future__ import annotations

import pandas as pd
import pytest

from icml25.pipelines.quantum_rl import nodes

PARAMS = {
    "seeds": [7, 3, 11, 0, 5], "T": 1000, "delta": 0.05, "claim_env": "rs",
    "envs": {"rs": {"kind": "riverswim", "n_states": 6},
             "rs8": {"kind": "riverswim", "n_states": 8}},
    "estimator": {"K": "auto"},
    "agents": {"q": {"kind": "optimistic", "role": "method"},
               "b": {"kind": "optimistic", "role": "baseline", "envs": ["rs8"],
                     "seeds": [2, 4, 6]}},
    "estimator_scaling": {"p_values": [0.3], "log2_n": [9, 10], "reps": 2, "seed": 0},
    "circuit": {"enabled": False},
    "claims": [{"claim": "x", "metric": "m", "method": "q", "threshold": 1.0,
                "relation": "better", "direction": "lower"}],
}


def _outputs(shard: int, n: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict]:
    """What run_agents writes for a shard: two checkpoints per run, one epoch for agent q only,
    one summary row per run, final estimates for agent b only."""
    jobs = nodes._jobs(nodes._params(PARAMS), shard, n)
    curves = pd.DataFrame([{"variant": a, "env": e, "seed": s, "t": t, "regret": 1.0 * t + s,
                            "realised_regret": 0.0} for a, e, s in jobs for t in (10, 100)],
                          columns=nodes.CURVE_COLUMNS)
    epochs = pd.DataFrame([{"variant": a, "env": e, "seed": s, "epoch": 0}
                           for a, e, s in jobs if a == "q"],
                          columns=nodes.EPOCH_COLUMNS)
    runs = pd.DataFrame([{"variant": a, "env": e, "seed": s, "T": 1000, "wall_seconds": 1.0,
                          "evi_seconds": 0.1, "evi_calls": 3, "K": -1} for a, e, s in jobs],
                        columns=nodes.RUN_COLUMNS)
    finals = {f"{a}/{e}/seed_{s}": {"N": s} for a, e, s in jobs if a == "b"}
    return curves, epochs, runs, finals


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7])
def test_runs_come_back_agent_by_agent_env_by_env_in_seed_list_order(n):
    shards = [_outputs(k, n) for k in range(n)]
    whole = _outputs(0, 1)
    merged = nodes.merge_agents(PARAMS, *(t for s in shards for t in s[:3]))
    for table, expected in zip(merged, whole[:3], strict=True):
        pd.testing.assert_frame_equal(table, expected, check_dtype=False)
    finals = nodes.merge_final_estimates(PARAMS, *(s[3] for s in shards))
    assert list(finals) == list(whole[3]) == ["b/rs8/seed_2", "b/rs8/seed_4", "b/rs8/seed_6"]


def test_shards_of_another_seed_list_or_agent_are_refused():
    shards = [_outputs(k, 2) for k in range(2)]
    with pytest.raises(ValueError, match="do not split a seed list"):
        nodes.merge_agents(PARAMS, *shards[1][:3], *shards[0][:3])
    other = PARAMS | {"seeds": [7, 3, 11, 0, 6]}
    with pytest.raises(ValueError, match=r"q runs on rs for seeds \[7, 3, 11, 0, 5\]"):
        nodes.merge_agents(other, *shards[0][:3], *shards[1][:3])
    ghost = shards[0][2].assign(variant="ghost")
    with pytest.raises(ValueError, match="run_summary hold runs"):
        nodes.merge_agents(PARAMS, shards[0][0], shards[0][1], pd.concat(
            [shards[0][2], ghost], ignore_index=True), *shards[1][:3])
    with pytest.raises(ValueError, match=r"final estimates \['ghost/rs/seed_7'\]"):
        nodes.merge_final_estimates(PARAMS, {"ghost/rs/seed_7": {}}, shards[1][3])
    with pytest.raises(ValueError, match="do not split into"):
        nodes.merge_agents(PARAMS, *shards[0][:2])
