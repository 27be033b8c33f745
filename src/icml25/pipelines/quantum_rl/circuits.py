"""Real amplitude-estimation circuits, run on qiskit-aer, against the analytic outcome pmf.

Optional: needs the ``icml25[quantum]`` extra (qiskit, qiskit-aer). The pipeline runs without it
(the check then reports ``skipped``). Two circuits (canonical AE, Brassard et al. 2002, Fig. 2):

* Bernoulli: ``A = ry(2 phi)`` with ``sin^2(phi) = p`` on one qubit; the Grover iterate restricted
  to span{A|0>, its complement} is the rotation ``ry(4 phi)``, so the counting qubit ``j``
  controls ``ry(4 phi 2^j)``; then the inverse QFT and measurement.
* Transition row: ``A_j`` = state preparation of ``sum_s' sqrt(P(s'|s,a)) |s'>`` on two qubits and
  a flag qubit flipped iff the register equals ``j`` (``mcx``); the Grover iterate is qiskit's
  ``grover_operator(oracle = Z on the flag, state_preparation = A_j)``, applied as controlled
  powers ``Q^{2^k}``.

Counts keys are little-endian bit strings; clbit ``k`` measures counting qubit ``k``, so
``int(key, 2)`` is the outcome ``y``.
"""

from __future__ import annotations

import math

import numpy as np

from icml25.pipelines.quantum_rl.amplitude_estimation import ae_pmf


def qiskit_available() -> bool:
    try:
        import qiskit  # noqa: F401
        import qiskit_aer  # noqa: F401
    except ImportError:
        return False
    return True


def _measure_counting(qc, counting, m: int):
    from qiskit.circuit.library import QFTGate

    qc.append(QFTGate(m).inverse(), counting)
    qc.measure(counting, range(m))
    return qc


def bernoulli_ae_circuit(p: float, m: int):
    """Canonical AE of a Bernoulli(p) amplitude with ``m`` counting qubits."""
    from qiskit import QuantumCircuit

    phi = math.asin(math.sqrt(p))
    qc = QuantumCircuit(m + 1, m)
    target = m
    qc.ry(2 * phi, target)
    for j in range(m):
        qc.h(j)
        qc.cry(4 * phi * 2**j, j, target)
    return _measure_counting(qc, list(range(m)), m)


def transition_row_ae_circuit(row: list[float], target_state: int, m: int):
    """Canonical AE of ``P(target_state | s, a)`` from the oracle preparing ``sqrt(row)``."""
    from qiskit import QuantumCircuit
    from qiskit.circuit.library import StatePreparation, grover_operator

    amps = np.sqrt(np.asarray(row, dtype=float))
    n_reg = int(math.log2(len(amps)))
    prep = QuantumCircuit(n_reg + 1, name="A_j")
    prep.append(StatePreparation(amps), range(n_reg))
    zeros = [q for q in range(n_reg) if not (target_state >> q) & 1]
    if zeros:
        prep.x(zeros)
    prep.mcx(list(range(n_reg)), n_reg)
    if zeros:
        prep.x(zeros)
    oracle = QuantumCircuit(n_reg + 1)
    oracle.z(n_reg)
    grover = grover_operator(oracle, state_preparation=prep)

    qc = QuantumCircuit(m + n_reg + 1, m)
    work = list(range(m, m + n_reg + 1))
    qc.append(prep, work)
    for j in range(m):
        qc.h(j)
        qc.append(grover.power(2**j).control(annotated=False), [j, *work])
    return _measure_counting(qc, list(range(m)), m)


def run_counts(circuit, shots: int, seed: int) -> np.ndarray:
    """Histogram of the outcomes ``y`` (length ``2^m``) from ``shots`` aer shots."""
    from qiskit import transpile
    from qiskit_aer import AerSimulator

    sim = AerSimulator(seed_simulator=seed)
    compiled = transpile(circuit, sim, optimization_level=1, seed_transpiler=seed)
    counts = sim.run(compiled, shots=shots).result().get_counts()
    hist = np.zeros(2**circuit.num_clbits)
    for key, value in counts.items():
        hist[int(key.replace(" ", ""), 2)] += value
    return hist


def total_variation(pmf: np.ndarray, hist: np.ndarray) -> float:
    return 0.5 * float(np.abs(pmf - hist / hist.sum()).sum())


def circuit_check(cases: list[tuple[float, int]], row_cases: list[tuple[list[float], int, int]],
                  shots: int, seed: int) -> dict:
    """TV distance between the aer histogram and the analytic AE pmf for every case."""
    if not qiskit_available():
        return {"skipped": True, "reason": "qiskit / qiskit-aer not installed (icml25[quantum])",
                "cases": []}
    results = []
    for i, (p, m) in enumerate(cases):
        circuit = bernoulli_ae_circuit(p, m)
        hist = run_counts(circuit, shots, seed + i)
        results.append({"circuit": "bernoulli", "p": p, "m": m, "shots": shots,
                        "depth": circuit.depth(),
                        "tv": total_variation(ae_pmf(p, 2**m), hist)})
    for i, (row, target, m) in enumerate(row_cases):
        circuit = transition_row_ae_circuit(row, target, m)
        hist = run_counts(circuit, shots, seed + len(cases) + i)
        p = row[target]
        results.append({"circuit": "transition_row", "p": p, "m": m, "shots": shots,
                        "row": list(row), "target": target, "depth": circuit.decompose().depth(),
                        "tv": total_variation(ae_pmf(p, 2**m), hist)})
    return {"skipped": False, "cases": results,
            "max_tv": max((c["tv"] for c in results), default=math.nan)}
