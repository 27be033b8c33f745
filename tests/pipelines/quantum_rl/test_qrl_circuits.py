"""The analytic AE pmf against real circuits run on qiskit-aer (optional extra icml25[quantum])."""

from __future__ import annotations

import numpy as np
import pytest

from icml25.pipelines.quantum_rl.amplitude_estimation import ae_pmf
from icml25.pipelines.quantum_rl.circuits import (
    bernoulli_ae_circuit,
    circuit_check,
    run_counts,
    total_variation,
    transition_row_ae_circuit,
)

pytest.importorskip("qiskit")
pytest.importorskip("qiskit_aer")


@pytest.mark.slow
def test_bernoulli_circuit_histogram_matches_the_analytic_pmf():
    hist = run_counts(bernoulli_ae_circuit(0.3, 4), shots=20_000, seed=0)
    assert hist.sum() == 20_000
    assert total_variation(ae_pmf(0.3, 16), hist) < 0.03
    # and it is not a match by accident: another p's pmf is far away
    assert total_variation(ae_pmf(0.1, 16), hist) > 0.2


@pytest.mark.slow
def test_transition_row_circuit_estimates_the_marked_next_state():
    row = [0.1, 0.2, 0.3, 0.4]
    for target in (0, 3):
        hist = run_counts(transition_row_ae_circuit(row, target, 3), shots=4000, seed=1)
        assert total_variation(ae_pmf(row[target], 8), hist) < 0.05


def test_circuit_check_report():
    report = circuit_check([(0.5, 2)], [], shots=500, seed=0)
    assert report["skipped"] is False
    (case,) = report["cases"]
    assert case["circuit"] == "bernoulli" and 0.0 <= case["tv"] < 0.1
    assert report["max_tv"] == case["tv"]
    assert np.isfinite(case["depth"])
