"""Wiring of the twa pipeline (``docs/papers/twa.md``).

corpus -> base model and other systems -> annotated outputs -> every method's grid tuned on dev
with the first seed (``twa.select_methods``, which also evaluates the selected runs as that
seed's models) -> the other seeds rerun at the selected hyperparameters, one node per seed shard
(namespace ``twa.methods.shard_<k>``; shard ``k`` of ``n`` takes ``seeds[k::n]``, see
:mod:`icml25.core.sweep`; shard 0 reuses the selection's first seed) -> merged in seed order
(``twa.merge_methods``) -> metrics, claims and figures; a separate real-data node (tag ``real``)
finetunes a local HF seq2seq checkpoint on local MQM TSV annotations.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.twa import nodes
from icml25.pipelines.twa.params import TwaParams

PARAMETERS = TwaParams
P = "params:twa"


STUDY = ["twa.lexicon", "twa.corpus", "twa.systems", "twa.annotated"]


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


def create_pipeline(**kwargs) -> Pipeline:
    ns = "twa"
    n = seed_shards()
    shards = [f"twa.methods.shard_{k}" for k in range(n)]
    return Pipeline([
        node(nodes.make_corpus, P, ["twa.lexicon", "twa.corpus"], name="make_corpus",
             namespace=ns),
        node(nodes.train_systems, ["twa.lexicon", "twa.corpus", P], "twa.systems",
             name="train_systems", namespace=ns, tags=["training"]),
        node(nodes.make_annotated, ["twa.lexicon", "twa.corpus", "twa.systems", P],
             "twa.annotated", name="make_annotated", namespace=ns),
        node(nodes.select_methods, [*STUDY, P], "twa.selection", name="select_methods",
             namespace=ns, tags=["training"]),
        *(node(_bind(nodes.run_method_seeds, shard=k, n_shards=n),
               [*STUDY, "twa.selection", P], f"{shard}.runs", name="run_method_seeds",
               namespace=shard, tags=["training"])
          for k, shard in enumerate(shards)),
        node(nodes.merge_methods, ["twa.selection", P, *(f"{s}.runs" for s in shards)],
             "twa.results", name="merge_methods", namespace=ns),
        node(nodes.judge_claims,
             ["twa.results", "twa.annotated", P, "run_info", "params:claims_confidence"],
             ["twa.metrics", "twa.claims"], name="judge_claims", namespace=ns),
        node(nodes.plot_results, "twa.results", "twa.figures", name="plot_results",
             namespace=ns),
        # real-data branch: local MQM TSV + local HF seq2seq checkpoint (off unless configured)
        node(nodes.run_real, P, "twa.real_results", name="run_real", namespace=ns,
             tags=["real"]),
    ])
