"""Wiring of the frugal pipeline (spec ``frugal.md``, "Kedro pipeline sketch").

corpus -> document split -> BPE tokenizer -> token streams -> one pre-training node per
optimiser configuration (namespace ``frugal.<variant>``, seeds looped inside) -> compare
(metrics, claims, table, figures, MLflow child runs).
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.pipelines.frugal import nodes
from icml25.pipelines.frugal.params import VARIANTS, FrugalParams

PARAMETERS = FrugalParams
P = "params:frugal"


def _for_variant(func, variant: str):
    return update_wrapper(partial(func, variant=variant), func)


def create_pipeline(**kwargs) -> Pipeline:
    ns = "frugal"
    data = [
        node(nodes.build_corpus, P, ["frugal.corpus_text", "frugal.corpus_meta"],
             name="build_corpus", namespace=ns),
        node(nodes.split_corpus, ["frugal.corpus_text", P],
             ["frugal.train_text", "frugal.val_text"], name="split_corpus", namespace=ns),
        node(nodes.fit_tokenizer, ["frugal.train_text", P], "frugal.tokenizer",
             name="fit_tokenizer", namespace=ns),
        node(nodes.tokenize, ["frugal.tokenizer", "frugal.train_text", "frugal.val_text"],
             ["frugal.train_ids", "frugal.val_ids"], name="tokenize", namespace=ns),
    ]
    training = [
        node(_for_variant(nodes.pretrain_variant, v),
             ["frugal.train_ids", "frugal.val_ids", "frugal.tokenizer", P],
             [f"frugal.{v}.results", f"frugal.{v}.models"], name="pretrain",
             namespace=f"frugal.{v}", tags=["training"])
        for v in VARIANTS
    ]
    report = [
        node(nodes.compare,
             ["frugal.corpus_meta", P, "run_info", *(f"frugal.{v}.results" for v in VARIANTS)],
             ["frugal.metrics", "frugal.claims", "frugal.results_table", "frugal.figures"],
             name="compare", namespace=ns),
    ]
    return Pipeline(data + training + report)
