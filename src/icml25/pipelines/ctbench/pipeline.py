"""Wiring of the ctbench pipeline (spec ``ctbench.md``, "Kedro pipeline sketch").

data -> stratified split -> per ε setting and method one train node (seeds inside) and one
certify node (namespace ``ctbench.<setting>.<method>``); standard training has no ε and is
trained once (``ctbench.standard``), then certified at every ε -> metrics, claims, bar chart,
training curves in MLflow.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.pipelines.ctbench import nodes
from icml25.pipelines.ctbench.certified_training import METHODS
from icml25.pipelines.ctbench.params import SETTINGS, CtbenchParams

PARAMETERS = CtbenchParams
P = "params:ctbench"
SPLIT = "ctbench.split"


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


def _models_name(setting: str, method: str) -> str:
    return "ctbench.standard.models" if method == "standard" else f"ctbench.{setting}.{method}.models"


def create_pipeline(**kwargs) -> Pipeline:
    ns = "ctbench"
    data = [
        node(nodes.load_data, P, "ctbench.images", name="load_data", namespace=ns),
        node(nodes.split_data, ["ctbench.images", P], SPLIT, name="split_data", namespace=ns),
        node(_bind(nodes.train_method, setting=None, method="standard"), [SPLIT, P],
             "ctbench.standard.models", name="train", namespace="ctbench.standard",
             tags=["training"]),
    ]
    per_setting = []
    for setting in SETTINGS:
        for method in METHODS:
            sns = f"ctbench.{setting}.{method}"
            if method != "standard":
                per_setting.append(node(
                    _bind(nodes.train_method, setting=setting, method=method), [SPLIT, P],
                    _models_name(setting, method), name="train", namespace=sns,
                    tags=["training"]))
            per_setting.append(node(
                _bind(nodes.certify_method, setting=setting, method=method),
                [_models_name(setting, method), SPLIT, P], f"{sns}.certification",
                name="certify", namespace=sns, tags=["certification"]))
    tables = [f"ctbench.{s}.{m}.certification" for s in SETTINGS for m in METHODS]
    models = sorted({_models_name(s, m) for s in SETTINGS for m in METHODS})
    report = [
        node(nodes.judge_claims, [P, "run_info", *tables], ["ctbench.metrics", "ctbench.claims"],
             name="judge_claims", namespace=ns),
        node(nodes.plot_results, ["ctbench.metrics", P], "ctbench.figures", name="plot_results",
             namespace=ns),
        node(nodes.log_training_curves, [P, *models], None, name="log_training_curves",
             namespace=ns),
    ]
    return Pipeline(data + per_setting + report)
