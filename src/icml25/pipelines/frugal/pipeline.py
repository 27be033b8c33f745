"""Wiring of the frugal pipeline (``docs/papers/frugal.md``).

corpus -> deduplicated train / validation / test split -> BPE tokenizer -> token streams ->
one learning-rate selection node per optimiser (its grid on the validation split) -> one
pre-training node per optimiser configuration and seed shard, measured on the
test split (namespace ``frugal.<variant>.shard_<k>``, shard ``k`` of ``n`` trains
``seeds[k::n]``, see :mod:`icml25.core.sweep`) -> compare (reads every shard:
metrics, claims, table, figures, MLflow child runs). Variants and seeds are separate nodes, so a
parallel runner spreads them over its workers.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.frugal import nodes
from icml25.pipelines.frugal.params import VARIANTS, FrugalParams

PARAMETERS = FrugalParams
P = "params:frugal"


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


def create_pipeline(**kwargs) -> Pipeline:
    ns = "frugal"
    data = [
        node(nodes.build_corpus, P, ["frugal.corpus_text", "frugal.corpus_meta"],
             name="build_corpus", namespace=ns),
        node(nodes.split_corpus, ["frugal.corpus_text", P],
             ["frugal.train_text", "frugal.val_text", "frugal.test_text", "frugal.split_meta"],
             name="split_corpus", namespace=ns),
        node(nodes.fit_tokenizer, ["frugal.train_text", P], "frugal.tokenizer",
             name="fit_tokenizer", namespace=ns),
        node(nodes.tokenize,
             ["frugal.tokenizer", "frugal.train_text", "frugal.val_text", "frugal.test_text"],
             ["frugal.train_ids", "frugal.val_ids", "frugal.test_ids"], name="tokenize",
             namespace=ns),
    ]
    # learning rates: each variant's grid on the validation split, one node per variant; every
    # shard reads all selections (an ablation may take another variant's setting, lr_from)
    selections = [f"frugal.{v}.selection" for v in VARIANTS]
    selection = [
        node(_bind(nodes.select_lr, variant=v),
             ["frugal.train_ids", "frugal.val_ids", "frugal.tokenizer", P],
             f"frugal.{v}.selection", name="select_lr", namespace=f"frugal.{v}",
             tags=["lr_selection"])
        for v in VARIANTS
    ]
    n_shards = seed_shards()
    shards = [f"frugal.{v}.shard_{k}" for v in VARIANTS for k in range(n_shards)]
    training = [
        node(_bind(nodes.pretrain_variant, variant=v, shard=k, n_shards=n_shards),
             ["frugal.train_ids", "frugal.test_ids", "frugal.tokenizer", P, *selections],
             [f"frugal.{v}.shard_{k}.results", f"frugal.{v}.shard_{k}.models"], name="pretrain",
             namespace=f"frugal.{v}.shard_{k}", tags=["training"])
        for v in VARIANTS for k in range(n_shards)
    ]
    report = [
        node(nodes.compare,
             ["frugal.corpus_meta", "frugal.split_meta", P, "run_info",
              "params:claims_confidence", *(f"{s}.results" for s in shards), *selections],
             ["frugal.metrics", "frugal.claims", "frugal.results_table", "frugal.figures"],
             name="compare", namespace=ns),
    ]
    return Pipeline(data + selection + training + report)
