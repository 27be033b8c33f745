"""Wiring of the twa pipeline (spec ``twa.md``, "Kedro pipeline sketch").

corpus -> base model and other systems -> annotated outputs -> every method finetuned (grids
tuned on dev) and evaluated per seed -> metrics, claims and figures; a separate real-data node
(tag ``real``) finetunes a local HF seq2seq checkpoint on local MQM TSV annotations.
"""

from __future__ import annotations

from kedro.pipeline import Pipeline, node

from icml25.pipelines.twa import nodes
from icml25.pipelines.twa.params import TwaParams

PARAMETERS = TwaParams
P = "params:twa"


def create_pipeline(**kwargs) -> Pipeline:
    ns = "twa"
    return Pipeline([
        node(nodes.make_corpus, P, ["twa.lexicon", "twa.corpus"], name="make_corpus",
             namespace=ns),
        node(nodes.train_systems, ["twa.lexicon", "twa.corpus", P], "twa.systems",
             name="train_systems", namespace=ns, tags=["training"]),
        node(nodes.make_annotated, ["twa.lexicon", "twa.corpus", "twa.systems", P],
             "twa.annotated", name="make_annotated", namespace=ns),
        node(nodes.run_methods,
             ["twa.lexicon", "twa.corpus", "twa.systems", "twa.annotated", P],
             "twa.results", name="run_methods", namespace=ns, tags=["training"]),
        node(nodes.judge_claims, ["twa.results", "twa.annotated", P, "run_info"],
             ["twa.metrics", "twa.claims"], name="judge_claims", namespace=ns),
        node(nodes.plot_results, "twa.results", "twa.figures", name="plot_results",
             namespace=ns),
        # real-data branch: local MQM TSV + local HF seq2seq checkpoint (off unless configured)
        node(nodes.run_real, P, "twa.real_results", name="run_real", namespace=ns,
             tags=["real"]),
    ])
