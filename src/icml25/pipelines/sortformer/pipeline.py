"""Wiring of the sortformer pipeline (spec ``sortformer.md``, "Kedro pipeline sketch").

speaker bank -> sessions (+RTTM, stats) -> features -> one training node per loss variant
(namespace ``sortformer.<variant>``: pil, sort, hybrid; seeds loop inside) -> post-processing
tuning and evaluation, clustering baseline -> word mixtures -> multi-speaker ASR with no, hybrid
diarizer and oracle kernels -> metrics, claims and figures.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.pipelines.sortformer import nodes
from icml25.pipelines.sortformer.params import VARIANTS, SortformerParams

PARAMETERS = SortformerParams
P = "params:sortformer"
NS = "sortformer"


def _for_variant(func, variant: str):
    return update_wrapper(partial(func, variant=variant), func)


def create_pipeline(**kwargs) -> Pipeline:
    data = [
        node(nodes.build_speaker_bank, P, ["sortformer.speakers", "sortformer.utterances"],
             name="build_speaker_bank", namespace=NS),
        node(nodes.simulate_sessions, ["sortformer.utterances", "sortformer.speakers", P],
             ["sortformer.sessions", "sortformer.rttm", "sortformer.session_stats"],
             name="simulate_sessions", namespace=NS),
        node(nodes.compute_features, ["sortformer.sessions", "sortformer.utterances", P],
             "sortformer.features", name="compute_features", namespace=NS),
    ]
    models = [f"sortformer.{v}.models" for v in VARIANTS]
    training = [
        node(_for_variant(nodes.train_variant, v), ["sortformer.features", P],
             f"sortformer.{v}.models", name="train", namespace=f"sortformer.{v}",
             tags=["training"])
        for v in VARIANTS
    ]
    evaluation = [
        node(nodes.evaluate_diarizers, ["sortformer.features", "sortformer.sessions", P, *models],
             "sortformer.der_table", name="evaluate_diarizers", namespace=NS),
        node(nodes.run_clustering_baseline,
             ["sortformer.sessions", "sortformer.utterances", "sortformer.features", P],
             "sortformer.clustering_table", name="run_clustering_baseline", namespace=NS),
        node(nodes.build_word_mixtures, ["sortformer.utterances", "sortformer.speakers", P],
             "sortformer.word_mixtures", name="build_word_mixtures", namespace=NS),
        node(nodes.train_evaluate_msasr,
             ["sortformer.word_mixtures", "sortformer.utterances", "sortformer.hybrid.models", P],
             "sortformer.cpwer_table", name="train_evaluate_msasr", namespace=NS,
             tags=["training"]),
        node(nodes.judge_claims,
             ["sortformer.der_table", "sortformer.clustering_table", "sortformer.cpwer_table",
              "sortformer.session_stats", P, "run_info"],
             ["sortformer.metrics", "sortformer.claims"], name="judge_claims", namespace=NS),
        node(nodes.log_training_curves, [P, *models], None, name="log_training_curves",
             namespace=NS),
        node(nodes.plot_figures,
             ["sortformer.features", "sortformer.der_table", "sortformer.clustering_table",
              "sortformer.sessions", P, *models],
             "sortformer.figures", name="plot_figures", namespace=NS),
    ]
    return Pipeline(data + training + evaluation)
