"""Wiring of the wavetoken pipeline (docs/papers/wavetoken.md).

data -> evaluation sets and training corpus -> one train + forecast node pair per tokenizer
variant and seed shard (namespace ``wavetoken.<variant>.shard_<k>``, shard ``k`` of ``n`` trains
``seeds[k::n]``, see :mod:`icml25.core.sweep`), one more pair per shard for the ablation variants
that ``wavetoken.ablations`` selects (``wavetoken.ablations.shard_<k>``), and the statistical
baselines -> scores -> metrics, claims and figures. Variants and seeds are separate nodes, so a parallel runner spreads
them over its workers.
"""

from __future__ import annotations

import warnings
from functools import partial, update_wrapper

from kedro.pipeline import Pipeline, node

from icml25.core.sweep import seed_shards
from icml25.pipelines.wavetoken import nodes
from icml25.pipelines.wavetoken.params import ABLATIONS, VARIANTS, WavetokenParams

PARAMETERS = WavetokenParams
P = "params:wavetoken"
#: the compute-scaling study's two tokenizer slots: ``wavetoken.scaling.variants[0]`` (the
#: method) and ``[1]`` (the control at the same vocabulary)
SCALING_SLOTS = ("method", "control")


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
        node(nodes.load_real_series, [P, "wavetoken.user_series"], "wavetoken.real_series",
             name="load_real_series", namespace=ns),
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
    # the main variants, then one group that trains the ablations the conf selects
    shards = [(v, k) for v in (*VARIANTS, ABLATIONS) for k in range(n_shards)]
    variants = [n for v, k in shards for n in _shard_nodes(v, k, n_shards)]
    forecasts = [f"wavetoken.{v}.shard_{k}.forecasts" for v, k in shards]
    models = [f"wavetoken.{v}.shard_{k}.models" for v, k in shards]
    evaluation = [
        node(nodes.forecast_stat_baselines, ["wavetoken.evaluation_sets", P],
             "wavetoken.baseline_forecasts", name="forecast_stat_baselines", namespace=ns),
        node(nodes.check_tokenizers, ["wavetoken.evaluation_sets", P],
             "wavetoken.tokenizer_roundtrip", name="check_tokenizers", namespace=ns),
        node(nodes.forecast_pretrained, ["wavetoken.evaluation_sets", P],
             "wavetoken.pretrained_forecasts", name="forecast_pretrained", namespace=ns),
        node(nodes.evaluate_forecasts,
             ["wavetoken.evaluation_sets", P, "wavetoken.baseline_forecasts",
              "wavetoken.pretrained_forecasts", *forecasts],
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
              "wavetoken.pretrained_forecasts", *forecasts],
             "wavetoken.forecast_plots", name="plot_forecasts", namespace=ns),
    ]
    return Pipeline(data + variants + evaluation)


def create_scaling_pipeline(**kwargs) -> Pipeline:
    """``wavetoken_scaling``: both tokenizers at every training budget and seed
    (:mod:`icml25.pipelines.wavetoken.scaling`), on the main run's data and evaluation sets."""
    from icml25.pipelines.wavetoken import scaling

    with warnings.catch_warnings():
        # the study reads the main run's `wavetoken.*` data sets from its own namespace
        warnings.filterwarnings("ignore", message="One or more dataset names contain '.'")
        return _scaling_pipeline(scaling)


def _scaling_pipeline(scaling) -> Pipeline:
    ns = "wavetoken_scaling"
    data = create_pipeline().to_outputs("wavetoken.evaluation_sets", "wavetoken.training_corpus")
    train = [
        node(_bind(scaling.train_scaling, position=i),
             ["wavetoken.training_corpus", "wavetoken.evaluation_sets", P],
             [f"{ns}.{slot}.forecasts", f"{ns}.{slot}.runs"], name="train_and_forecast",
             namespace=f"{ns}.{slot}", tags=["training"])
        for i, slot in enumerate(SCALING_SLOTS)
    ]
    evaluate = [
        node(scaling.forecast_seasonal_naive, ["wavetoken.evaluation_sets", P],
             f"{ns}.naive_forecasts", name="forecast_seasonal_naive", namespace=ns),
        node(scaling.evaluate_scaling,
             ["wavetoken.evaluation_sets", P, f"{ns}.naive_forecasts",
              *[f"{ns}.{slot}.forecasts" for slot in SCALING_SLOTS]],
             f"{ns}.scores", name="evaluate_scaling", namespace=ns),
        node(scaling.judge_scaling,
             [f"{ns}.scores", P, "run_info", "params:claims_confidence",
              *[f"{ns}.{slot}.runs" for slot in SCALING_SLOTS]],
             [f"{ns}.metrics", f"{ns}.claims", f"{ns}.table"], name="judge_scaling",
             namespace=ns),
        node(scaling.plot_scaling, [f"{ns}.table", f"{ns}.metrics"], f"{ns}.figures",
             name="plot_scaling", namespace=ns),
    ]
    return data + Pipeline(train + evaluate)


#: extra pipelines of this room (registered by icml25.pipeline_registry, not in __default__)
STUDIES = {"wavetoken_scaling": create_scaling_pipeline}
