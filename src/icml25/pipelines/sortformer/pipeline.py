"""Wiring of the sortformer pipeline (see ``docs/papers/sortformer.md``).

speaker bank -> sessions (+RTTM, stats) -> features -> one training node per loss variant and
seed shard (namespace ``sortformer.<variant>.shard_<k>``: pil, sort, hybrid; shard ``k`` of ``n``
trains ``seeds[k::n]``, see :mod:`icml25.core.sweep`) -> post-processing tuning and evaluation of
every shard's diarizers, clustering baseline -> word mixtures -> multi-speaker ASR with no, hybrid
diarizer and oracle kernels, one node per seed shard (``sortformer.msasr.shard_<k>``, reading
that shard's hybrid diarizers) -> cpWER table in seed order -> one-recording check
(``check_audio``: a named wav or a synthesised long session) -> metrics, claims and figures.
Variants and seeds are separate nodes, so a parallel runner spreads them over its workers.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.sortformer import nodes
from icml25.pipelines.sortformer.params import VARIANTS, SortformerParams

PARAMETERS = SortformerParams
P = "params:sortformer"
NS = "sortformer"


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


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
    n = seed_shards()
    # variant by variant, shard 0..n-1 within each: the order _merge_model_shards reads them in
    models = [f"sortformer.{v}.shard_{k}.models" for v in VARIANTS for k in range(n)]
    training = [
        node(_bind(nodes.train_variant, variant=v, shard=k, n_shards=n), ["sortformer.features", P],
             f"sortformer.{v}.shard_{k}.models", name="train",
             namespace=f"sortformer.{v}.shard_{k}", tags=["training"])
        for v in VARIANTS for k in range(n)
    ]
    msasr = [
        node(_bind(nodes.train_evaluate_msasr, shard=k, n_shards=n),
             ["sortformer.word_mixtures", "sortformer.utterances",
              f"sortformer.hybrid.shard_{k}.models", P],
             f"sortformer.msasr.shard_{k}.cpwer_table", name="train_evaluate_msasr",
             namespace=f"sortformer.msasr.shard_{k}", tags=["training"])
        for k in range(n)
    ]
    evaluation = [
        node(_bind(nodes.evaluate_diarizers, n_shards=n),
             ["sortformer.features", "sortformer.sessions", P, *models],
             "sortformer.der_table", name="evaluate_diarizers", namespace=NS),
        node(nodes.run_clustering_baseline,
             ["sortformer.sessions", "sortformer.utterances", "sortformer.features", P],
             "sortformer.clustering_table", name="run_clustering_baseline", namespace=NS),
        node(nodes.build_word_mixtures, ["sortformer.utterances", "sortformer.speakers", P],
             "sortformer.word_mixtures", name="build_word_mixtures", namespace=NS),
        node(nodes.merge_cpwer_tables,
             [f"sortformer.msasr.shard_{k}.cpwer_table" for k in range(n)],
             "sortformer.cpwer_table", name="merge_cpwer_tables", namespace=NS),
        node(_bind(nodes.check_audio, n_shards=n),
             ["sortformer.utterances", "sortformer.speakers", "sortformer.der_table",
              "sortformer.clustering_table", P, *models],
             "sortformer.audio_check", name="check_audio", namespace=NS),
        node(nodes.judge_claims,
             ["sortformer.der_table", "sortformer.clustering_table", "sortformer.cpwer_table",
              "sortformer.session_stats", P, "run_info", "params:claims_confidence",
              "sortformer.audio_check"],
             ["sortformer.metrics", "sortformer.claims"], name="judge_claims", namespace=NS),
        node(_bind(nodes.log_training_curves, n_shards=n), [P, *models], None,
             name="log_training_curves", namespace=NS),
        node(_bind(nodes.plot_figures, n_shards=n),
             ["sortformer.features", "sortformer.der_table", "sortformer.clustering_table",
              "sortformer.sessions", P, *models],
             "sortformer.figures", name="plot_figures", namespace=NS),
    ]
    return Pipeline(data + training + msasr + evaluation)
