"""Wiring of the wavetoken pipeline (spec ``wavetoken.md``, "Kedro pipeline sketch").

data -> evaluation sets and training corpus -> one train + forecast node pair per tokenizer
variant (namespace ``wavetoken.<variant>``) and the statistical baselines -> scores -> metrics,
claims and figures. Seeds loop inside the train/forecast nodes; variants are separate nodes.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.pipelines.wavetoken import nodes
from icml25.pipelines.wavetoken.params import VARIANTS, WavetokenParams

PARAMETERS = WavetokenParams
P = "params:wavetoken"


def _for_variant(func, variant: str):
    bound = partial(func, variant=variant)
    return update_wrapper(bound, func)


def _variant_nodes(variant: str) -> list:
    ns = f"wavetoken.{variant}"
    return [
        node(_for_variant(nodes.train_variant, variant),
             inputs=["wavetoken.training_corpus", P], outputs=f"{ns}.models",
             name="train", namespace=ns,
             tags=["training"]),
        node(_for_variant(nodes.forecast_variant, variant),
             inputs=[f"{ns}.models", "wavetoken.evaluation_sets", P],
             outputs=f"{ns}.forecasts", name="forecast", namespace=ns),
    ]


def create_pipeline(**kwargs) -> Pipeline:
    ns = "wavetoken"
    data = [
        node(nodes.load_real_series, P, "wavetoken.real_series", name="load_real_series",
             namespace=ns),
        node(nodes.generate_kernelsynth, P, "wavetoken.kernelsynth",
             name="generate_kernelsynth", namespace=ns),
        node(nodes.generate_stress_sets, P, "wavetoken.stress_sets",
             name="generate_stress_sets", namespace=ns),
        node(nodes.build_evaluation_sets,
             ["wavetoken.real_series", "wavetoken.kernelsynth", "wavetoken.stress_sets", P],
             "wavetoken.evaluation_sets", name="build_evaluation_sets", namespace=ns),
        node(nodes.build_training_corpus, ["wavetoken.real_series", "wavetoken.kernelsynth", P],
             "wavetoken.training_corpus", name="build_training_corpus", namespace=ns),
    ]
    variants = [n for v in VARIANTS for n in _variant_nodes(v)]
    forecasts = [f"wavetoken.{v}.forecasts" for v in VARIANTS]
    evaluation = [
        node(nodes.forecast_stat_baselines, ["wavetoken.evaluation_sets", P],
             "wavetoken.baseline_forecasts", name="forecast_stat_baselines", namespace=ns),
        node(nodes.check_tokenizers, ["wavetoken.evaluation_sets", P],
             "wavetoken.tokenizer_roundtrip", name="check_tokenizers", namespace=ns),
        node(nodes.evaluate_forecasts,
             ["wavetoken.evaluation_sets", P, "wavetoken.baseline_forecasts", *forecasts],
             "wavetoken.scores", name="evaluate_forecasts", namespace=ns),
        node(nodes.judge_claims,
             ["wavetoken.scores", "wavetoken.tokenizer_roundtrip", P, "run_info"],
             ["wavetoken.metrics", "wavetoken.claims"], name="judge_claims", namespace=ns),
        node(nodes.log_training_curves, [P, *(f"wavetoken.{v}.models" for v in VARIANTS)], None,
             name="log_training_curves", namespace=ns),
        node(nodes.register_model,
             ["wavetoken.wavetoken.models", "wavetoken.evaluation_sets", P], None,
             name="register_model", namespace=ns),
        node(nodes.plot_forecasts,
             ["wavetoken.evaluation_sets", P, "wavetoken.metrics", "wavetoken.baseline_forecasts",
              *forecasts],
             "wavetoken.forecast_plots", name="plot_forecasts", namespace=ns),
    ]
    return Pipeline(data + variants + evaluation)
