"""Wiring of the knowledge_swap pipeline (``docs/papers/knowledge_swap.md``).

MNIST subset (the pretraining domain) + generated glyphs -> the pretraining sets and, per swap
setting (``data.settings``: which digits are forgotten, which glyph classes learned), retain /
forget / learn sets -> per seed shard (shard ``k`` of
``n`` takes ``seeds[k::n]``, see :mod:`icml25.core.sweep`) the pretrained ViTs
(``knowledge_swap.pretrained.shard_<k>``) and the retrain oracles
(``knowledge_swap.retrain_oracle.shard_<k>``) -> one swap node per variant and seed shard
(namespace ``knowledge_swap.<variant>.shard_<k>``: LtF, FtL, learn-only, forget-only, joint,
naive fine-tune, equal-weight ablations, every setting), each reading its own shard's
backbones -> metrics, claims (each judged per setting) and figures from every shard. Variants and seeds are separate nodes, so a parallel runner
spreads them over its workers.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.knowledge_swap import nodes
from icml25.pipelines.knowledge_swap.params import SWAP_VARIANTS, KnowledgeSwapParams

PARAMETERS = KnowledgeSwapParams
P = "params:knowledge_swap"
NS = "knowledge_swap"


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


def create_pipeline(**kwargs) -> Pipeline:
    data = [
        node(nodes.load_mnist, P, f"{NS}.mnist", name="load_mnist", namespace=NS),
        node(nodes.make_glyphs, P, f"{NS}.glyphs", name="make_glyphs", namespace=NS),
        node(nodes.split_pretrain_sets, [f"{NS}.mnist", P], f"{NS}.pretrain_sets",
             name="split_pretrain_sets", namespace=NS),
        node(nodes.split_sets, [f"{NS}.mnist", f"{NS}.glyphs", P], f"{NS}.swap_sets",
             name="split_sets", namespace=NS),
    ]
    n = seed_shards()
    backbones = [
        node(_bind(train, shard=k, n_shards=n), [f"{NS}.{sets}", P],
             f"{NS}.{models}.shard_{k}.models", name=train.__name__,
             namespace=f"{NS}.{models}.shard_{k}", tags=["training"])
        for models, train, sets in (("pretrained", nodes.pretrain_backbone, "pretrain_sets"),
                                    ("retrain_oracle", nodes.retrain_oracle, "swap_sets"))
        for k in range(n)
    ]
    swaps = [
        node(_bind(nodes.swap_variant, variant=v, shard=k, n_shards=n),
             [f"{NS}.pretrained.shard_{k}.models", f"{NS}.swap_sets", P],
             [f"{NS}.{v}.shard_{k}.results", f"{NS}.{v}.shard_{k}.models"], name="swap",
             namespace=f"{NS}.{v}.shard_{k}", tags=["training"])
        for v in SWAP_VARIANTS for k in range(n)
    ]
    pretrained = [f"{NS}.pretrained.shard_{k}.models" for k in range(n)]
    oracles = [f"{NS}.retrain_oracle.shard_{k}.models" for k in range(n)]
    results = [f"{NS}.{v}.shard_{k}.results" for v in SWAP_VARIANTS for k in range(n)]
    report = [
        node(_bind(nodes.judge_claims, n_shards=n),
             [P, "run_info", "params:claims_confidence", *pretrained, *oracles, *results],
             [f"{NS}.metrics", f"{NS}.claims"], name="judge_claims", namespace=NS),
        node(_bind(nodes.plot_figures, n_shards=n), [P, *results], f"{NS}.figures",
             name="plot_figures", namespace=NS),
    ]
    return Pipeline(data + backbones + swaps + report)
