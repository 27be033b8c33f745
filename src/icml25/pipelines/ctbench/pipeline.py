"""Wiring of the ctbench pipeline (``docs/papers/ctbench.md``).

data -> stratified split -> per ε setting, method and seed shard one train node and one certify
node (namespace ``ctbench.<setting>.<method>.shard_<k>``, shard ``k`` of ``n`` takes
``seeds[k::n]``, see :mod:`icml25.core.sweep`); standard training has no ε and is trained once
per shard (``ctbench.standard.shard_<k>``), then certified at every ε -> metrics, claims, bar
chart, training curves in MLflow from every shard. Methods, settings and seeds are separate
nodes, so a parallel runner spreads them over its workers.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.ctbench import nodes
from icml25.pipelines.ctbench.params import METHODS, SETTINGS, CtbenchParams

PARAMETERS = CtbenchParams
P = "params:ctbench"
SPLIT = "ctbench.split"


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


def _trained(setting: str, method: str) -> str:
    """The namespace prefix of a trained model: standard training is shared by every ε."""
    return "ctbench.standard" if method == "standard" else f"ctbench.{setting}.{method}"


def _models_name(setting: str, method: str, shard: int) -> str:
    return f"{_trained(setting, method)}.shard_{shard}.models"


def create_pipeline(**kwargs) -> Pipeline:
    ns = "ctbench"
    n = seed_shards()
    data = [
        node(nodes.load_data, P, "ctbench.images", name="load_data", namespace=ns),
        node(nodes.split_data, ["ctbench.images", P], SPLIT, name="split_data", namespace=ns),
        *(node(_bind(nodes.train_method, setting=None, method="standard", shard=k, n_shards=n),
               [SPLIT, P], _models_name("", "standard", k), name="train",
               namespace=f"ctbench.standard.shard_{k}", tags=["training"])
          for k in range(n)),
    ]
    per_setting = []
    for setting in SETTINGS:
        for method in METHODS:
            for k in range(n):
                sns = f"ctbench.{setting}.{method}.shard_{k}"
                if method != "standard":
                    per_setting.append(node(
                        _bind(nodes.train_method, setting=setting, method=method, shard=k,
                              n_shards=n),
                        [SPLIT, P], _models_name(setting, method, k), name="train",
                        namespace=sns, tags=["training"]))
                per_setting.append(node(
                    _bind(nodes.certify_method, setting=setting, method=method),
                    [_models_name(setting, method, k), SPLIT, P], f"{sns}.certification",
                    name="certify", namespace=sns, tags=["certification"]))
    tables = [f"ctbench.{s}.{m}.shard_{k}.certification"
              for s in SETTINGS for m in METHODS for k in range(n)]
    models = [f"{prefix}.shard_{k}.models"
              for prefix in sorted({_trained(s, m) for s in SETTINGS for m in METHODS})
              for k in range(n)]
    report = [
        node(_bind(nodes.judge_claims, n_shards=n),
             [P, "run_info", "params:claims_confidence", *tables],
             ["ctbench.metrics", "ctbench.claims"], name="judge_claims", namespace=ns),
        node(nodes.plot_results, ["ctbench.metrics", P], "ctbench.figures", name="plot_results",
             namespace=ns),
        node(_bind(nodes.log_training_curves, n_shards=n), [P, *models], None,
             name="log_training_curves", namespace=ns),
    ]
    return Pipeline(data + per_setting + report)
