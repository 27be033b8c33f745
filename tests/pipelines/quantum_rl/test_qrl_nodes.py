"""Node-level checks: bad data is refused with a clear error, never turned into a silent NaN."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from icml25.core.mdp import MDPError
from icml25.pipelines.quantum_rl import nodes
from icml25.pipelines.quantum_rl.evaluation import check_curves


def test_corrupted_mdps_are_refused_before_planning():
    P = np.full((3, 2, 3), 1 / 3)
    P[1, 0, 2] = np.nan
    with pytest.raises(MDPError, match="NaN"):
        nodes.solve_optimal({"bad": {"P": P, "r": np.zeros((3, 2))}})
    with pytest.raises(MDPError, match=r"shape \(3, 3\); expected \(S, A\) = \(3, 2\)"):
        nodes.solve_optimal({"bad": {"P": np.full((3, 2, 3), 1 / 3), "r": np.zeros((3, 3))}})


def test_estimator_scaling_with_auto_k_uses_the_claim_environments_k():
    params = {
        "seeds": [0], "T": 100_000, "delta": 0.05, "claim_env": "rs",
        "envs": {"rs": {"kind": "riverswim", "n_states": 6}}, "estimator": {"K": "auto"},
        "agents": {"q": {"kind": "optimistic", "role": "method"}},
        "estimator_scaling": {"p_values": [0.3], "log2_n": [9, 10], "reps": 2, "seed": 0},
        "circuit": {"enabled": False},
        "claims": [{"claim": "x", "metric": "m", "method": "q", "threshold": 1.0,
                    "relation": "better", "direction": "lower"}],
    }
    table = nodes.estimator_scaling(params)
    quantum = table[table.method == "quantum"]
    # K = 69: 512 calls give M = 2^floor(log2(7)) = 4, 1024 give 8 (K = 7 would give 64 and 128)
    assert quantum.n.tolist() == [512, 1024]
    assert quantum.M.tolist() == [4, 8]


def test_regret_table_checks():
    curves = pd.DataFrame({"variant": ["q"], "env": ["e"], "seed": [0], "t": [1],
                           "regret": [0.4], "realised_regret": [0.4]})
    check_curves(curves)
    with pytest.raises(ValueError, match="empty table"):
        check_curves(curves.iloc[:0])
    with pytest.raises(ValueError, match="missing columns"):
        check_curves(curves.drop(columns="regret"))
    with pytest.raises(ValueError, match="NaN"):
        check_curves(curves.assign(regret=[np.nan]))


def test_circuit_check_is_skipped_cleanly_without_qiskit(monkeypatch):
    from icml25.pipelines.quantum_rl import circuits

    monkeypatch.setattr(circuits, "qiskit_available", lambda: False)
    report = circuits.circuit_check([(0.3, 4)], [], shots=100, seed=0)
    assert report["skipped"] is True and report["cases"] == []
    assert "icml25[quantum]" in report["reason"]


def test_per_mdp_comparison_pairs_seeds_and_skips_variants_not_run_there():
    from icml25.pipelines.quantum_rl.evaluation import mlflow_summary, per_mdp_comparison

    metrics = {"q": {"regret_T_a": [1.0, 5.0], "regret_T_b": [4.0, 4.0]},
               "u": {"regret_T_a": [2.0, 3.0], "regret_T_b": [1.0, 2.0]},
               "x": {"regret_T_a": [0.5, 0.5], "regret_T_b": [np.nan]}}
    out = per_mdp_comparison(metrics, "q", ["u", "x"], ["a", "b"])
    assert out["a"]["regret_T.method"] == pytest.approx(3.0)
    assert out["a"]["regret_T_minus.u"] == pytest.approx(0.5)    # (-1 + 2) / 2
    assert out["a"]["seeds_lower_than.u"] == pytest.approx(0.5)
    assert out["a"]["seeds_lower_than.x"] == 0.0
    assert out["b"]["regret_T_minus.u"] == pytest.approx(2.5)
    assert "regret_T_minus.x" not in out["b"]                  # x did not run on b

    optimal = {"a": {"rho_star": 0.4, "rho_star_lp": 0.4000001}}
    circuit = {"skipped": False, "max_tv": 0.02, "cases": [{"tv": 0.01}, {"tv": 0.02}]}
    summary = mlflow_summary(optimal, circuit, out)
    assert summary["rho_star.a"] == 0.4 and summary["rho_star_lp.a"] == 0.4000001
    assert summary["circuit.max_tv"] == 0.02 and summary["circuit.case_1.tv"] == 0.02
    assert summary["circuit.skipped"] == 0.0
    assert summary["per_mdp.b.regret_T_minus.u"] == pytest.approx(2.5)
    skipped = mlflow_summary(optimal, {"skipped": True, "cases": []}, {})
    assert skipped["circuit.skipped"] == 1.0 and "circuit.max_tv" not in skipped
