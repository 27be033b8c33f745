"""Wiring of the malot pipeline (docs/papers/malot.md).

miniF2F statements -> fragment coverage; synthetic theorems and correction records -> MA-LoT and
whole-proof sampling on the same theorems at equal generation count, one node per seed shard
(namespace ``malot.prover.shard_<k>``); a small LoT-Solver trained here with the LoT-TL stages
and run in the same loop and baselines, one train + run pair per seed shard (namespace
``malot.lot.shard_<k>``) -> merges back in seed order -> soundness suites -> metrics, claims
and figures. Shard ``k`` of ``n`` takes ``seeds[k::n]`` (see :mod:`icml25.core.sweep`); the
seed shards are separate nodes, so a parallel runner spreads them over its workers.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.malot import nodes
from icml25.pipelines.malot.params import MalotParams

PARAMETERS = MalotParams
P = "params:malot"


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


EVALUATION = ["malot.synth_theorems", "malot.minif2f", "malot.fragment_coverage", P]


def _prover_shards(n: int) -> list:
    """The prover variants (MA-LoT and whole-proof sampling) per seed shard, then one merge."""
    shards = [f"malot.prover.shard_{k}" for k in range(n)]
    return [
        *(node(_bind(nodes.run_variants, shard=k, n_shards=n), [*EVALUATION, "malot.endpoint"],
               [f"{s}.attempts", f"{s}.solved"], name="run_variants", namespace=s,
               tags=["training"])
          for k, s in enumerate(shards)),
        node(nodes.merge_runs, [P, *(f"{s}.{t}" for s in shards for t in ("attempts", "solved"))],
             ["malot.attempts", "malot.solved"], name="merge_runs", namespace="malot"),
    ]


def _lot_shards(n: int) -> list:
    """The LoT-Solver trained per seed shard and run in the same shard, then the merges of the
    shards' runs and of their training histories."""
    shards = [f"malot.lot.shard_{k}" for k in range(n)]
    out = []
    for k, s in enumerate(shards):
        out += [
            node(_bind(nodes.train_lot_solver, shard=k, n_shards=n),
                 ["malot.synth_theorems", "malot.synth_corrections", P],
                 [f"{s}.solver", f"{s}.training"], name="train_lot_solver", namespace=s,
                 tags=["training"]),
            node(nodes.run_lot_variants, [f"{s}.solver", *EVALUATION],
                 [f"{s}.attempts", f"{s}.solved"], name="run_lot_variants", namespace=s),
        ]
    out += [
        node(nodes.merge_lot_runs,
             [P, *(f"{s}.{t}" for s in shards for t in ("attempts", "solved"))],
             ["malot.lot_attempts", "malot.lot_solved"], name="merge_lot_runs",
             namespace="malot"),
        node(nodes.merge_lot_training, [P, *(f"{s}.training" for s in shards)],
             "malot.lot_training", name="merge_lot_training", namespace="malot"),
    ]
    return out


def create_pipeline(**kwargs) -> Pipeline:
    ns = "malot"
    n = seed_shards()
    return Pipeline([
        node(nodes.load_minif2f, P, "malot.minif2f", name="load_minif2f", namespace=ns),
        node(nodes.parse_fragment, ["malot.minif2f", P], "malot.fragment_coverage",
             name="parse_fragment", namespace=ns),
        node(nodes.generate_synthetic, P, ["malot.synth_theorems", "malot.synth_corrections"],
             name="generate_synthetic", namespace=ns),
        *_prover_shards(n),
        *_lot_shards(n),
        node(nodes.check_soundness, P, "malot.soundness", name="check_soundness", namespace=ns),
        node(nodes.judge_claims,
             ["malot.solved", "malot.attempts", "malot.lot_solved", "malot.lot_attempts",
              "malot.fragment_coverage", "malot.soundness", "malot.synth_corrections",
              "malot.lot_training", P, "run_info", "params:claims_confidence"],
             ["malot.metrics", "malot.claims"], name="judge_claims", namespace=ns),
        node(nodes.plot_results, ["malot.metrics", "malot.attempts", P], "malot.figures",
             name="plot_results", namespace=ns),
    ])
