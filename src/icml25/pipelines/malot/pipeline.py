"""Wiring of the malot pipeline (spec ``malot.md`` section 7).

miniF2F statements -> fragment coverage; synthetic theorems and correction records -> MA-LoT and
whole-proof sampling on the same theorems at equal generation count; a small LoT-Solver
trained here with the LoT-TL stages -> the same loop and baselines with the model -> soundness
suites ->
metrics, claims and figures.
"""

from __future__ import annotations

from kedro.pipeline import Pipeline, node

from icml25.pipelines.malot import nodes
from icml25.pipelines.malot.params import MalotParams

PARAMETERS = MalotParams
P = "params:malot"


def create_pipeline(**kwargs) -> Pipeline:
    ns = "malot"
    return Pipeline([
        node(nodes.load_minif2f, P, "malot.minif2f", name="load_minif2f", namespace=ns),
        node(nodes.parse_fragment, ["malot.minif2f", P], "malot.fragment_coverage",
             name="parse_fragment", namespace=ns),
        node(nodes.generate_synthetic, P, ["malot.synth_theorems", "malot.synth_corrections"],
             name="generate_synthetic", namespace=ns),
        node(nodes.run_variants,
             ["malot.synth_theorems", "malot.minif2f", "malot.fragment_coverage", P],
             ["malot.attempts", "malot.solved"], name="run_variants", namespace=ns),
        node(nodes.train_lot_solver,
             ["malot.synth_theorems", "malot.synth_corrections", P],
             ["malot.lot_solver", "malot.lot_training"], name="train_lot_solver", namespace=ns),
        node(nodes.run_lot_variants,
             ["malot.lot_solver", "malot.synth_theorems", "malot.minif2f",
              "malot.fragment_coverage", P],
             ["malot.lot_attempts", "malot.lot_solved"], name="run_lot_variants", namespace=ns),
        node(nodes.check_soundness, P, "malot.soundness", name="check_soundness", namespace=ns),
        node(nodes.judge_claims,
             ["malot.solved", "malot.attempts", "malot.lot_solved", "malot.lot_attempts",
              "malot.fragment_coverage", "malot.soundness", "malot.synth_corrections",
              "malot.lot_training", P, "run_info"],
             ["malot.metrics", "malot.claims"], name="judge_claims", namespace=ns),
        node(nodes.plot_results, ["malot.metrics", "malot.attempts", P], "malot.figures",
             name="plot_results", namespace=ns),
    ])
