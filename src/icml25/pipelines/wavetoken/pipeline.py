"""Wiring of the wavetoken pipeline (docs/papers/wavetoken.md).

data -> evaluation sets and training corpus -> one train + forecast node pair per tokenizer
variant and seed shard (namespace ``wavetoken.<variant>.shard_<k>``, shard ``k`` of ``n`` trains
``seeds[k::n]``, see :mod:`icml25.core.sweep`) and the statistical baselines -> scores ->
metrics, claims and figures. Variants and seeds are separate nodes, so a parallel runner spreads
them over its workers.
"""

from __future__ import annotations

from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.wavetoken import nodes
from icml25.pipelines.wavetoken.params import VARIANTS, WavetokenParams

PARAMETERS = WavetokenParams
P = "params:wavetoken"


def _bind(func, **kwargs):
    return update_wrapper(partial(func, **kwargs), func)


def _shard_nodes(variant: str, shard: int, n_shards: int) -> list:
    ns = f"wavetoken.{variant}.shard_{shard}"
    return [
        node(_bind(nodes.train_variant, variant=variant, shard=shard, n_shards=n_shards),
             inputs=["wavetoken.training_corpus", P], outputs=f"{ns}.models",
             name="train", namespace=ns, tags=["training"]),
        node(_bind(nodes.forecast_variant, variant=variant),
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
    n_shards = seed_shards()
    shards = [(v, k) for v in VARIANTS for k in range(n_shards)]
    variants = [n for v, k in shards for n in _shard_nodes(v, k, n_shards)]
    forecasts = [f"wavetoken.{v}.shard_{k}.forecasts" for v, k in shards]
    models = [f"wavetoken.{v}.shard_{k}.models" for v, k in shards]
    evaluation = [
        node(nodes.forecast_stat_baselines, ["wavetoken.evaluation_sets", P],
             "wavetoken.baseline_forecasts", name="forecast_stat_baselines", namespace=ns),
        node(nodes.check_tokenizers, ["wavetoken.evaluation_sets", P],
             "wavetoken.tokenizer_roundtrip", name="check_tokenizers", namespace=ns),
        node(nodes.evaluate_forecasts,
             ["wavetoken.evaluation_sets", P, "wavetoken.baseline_forecasts", *forecasts],
             "wavetoken.scores", name="evaluate_forecasts", namespace=ns),
        node(nodes.evaluate_series,
             ["wavetoken.evaluation_sets", P, *forecasts],
             "wavetoken.series_scores", name="evaluate_series", namespace=ns),
        node(nodes.judge_claims,
             ["wavetoken.scores", "wavetoken.series_scores", "wavetoken.tokenizer_roundtrip", P,
              "run_info", "params:claims_confidence"],
             ["wavetoken.metrics", "wavetoken.claims"], name="judge_claims", namespace=ns),
        node(nodes.log_training_curves, [P, *models], None,
             name="log_training_curves", namespace=ns),
        node(nodes.register_model,  # shard 0 holds the method's first seed
             ["wavetoken.wavetoken.shard_0.models", "wavetoken.evaluation_sets", P], None,
             name="register_model", namespace=ns),
        node(nodes.plot_forecasts,
             ["wavetoken.evaluation_sets", P, "wavetoken.metrics", "wavetoken.baseline_forecasts",
              *forecasts],
             "wavetoken.forecast_plots", name="plot_forecasts", namespace=ns),
    ]
    return Pipeline(data + variants + evaluation)
