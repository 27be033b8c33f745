"""The CPU dry run of a paper-scale configuration (``conf/paper_check``, docs/scale.md).

A dry-run environment (``cpu_dry_run: true`` in its globals) keeps the paper's shapes and cuts
its counts. While a room runs in it, :class:`TrainingStepRecorder` watches every torch training
step of the run, whatever room code it is, through torch's global hooks:

- a global module forward hook records each *root* module call (one not inside another module's
  forward) made with gradients on, with its inputs;
- a global optimizer step pre-hook counts the steps of each optimizer, and at an optimizer's first
  step measures the root calls since the previous step whose module holds parameters of that
  optimizer: :func:`icml25.core.training_cost.measure_training_step` on the ``meta`` device
  (FLOPs forward + backward, activation bytes), so a step's cost is measured at the paper's shapes.

:class:`PaperCheckHook` then writes ``<data_root>/08_reporting/<room>/paper_check.json`` per room
and logs it to the run's MLflow run: the models and their cost per step, the dry run's wall time
and peak resident memory, and the full paper config's estimated time and memory on one H100.

The paper config's step count comes from the room's ``paper_check.<room>`` parameters, a product
of parameter values read from the paper environment (the dry run's parent): ``steps`` (optimizer
steps of one training run) and ``runs`` (training runs: seeds, variants). Each factor is an
integer, a dotted parameter key (a number is its value, a bool 0 or 1, a list or mapping its
length), a list of factors that are added, ``{product: [...]}``, ``{ceil_div: [a, b]}``
(⌈a/b⌉, batches of an epoch)
or ``{first: [key, ..., default]}`` (the first key set and not null). The same product on the dry run's own parameters must equal the steps
the recorder counted (``steps_formula_matches_dry_run``), which checks the formula.
"""

from __future__ import annotations

import json
import logging
import math
import resource
import sys
import time
import weakref
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kedro.framework.hooks import hook_impl

from icml25.core.config_loader import is_cpu_dry_run

__all__ = ["PAPER_CHECK_HOOKS", "PaperCheckHook", "TrainingStepRecorder", "count_from_parameters", "paper_report"]

logger = logging.getLogger(__name__)
REPORT_NAME = "paper_check.json"


# ------------------------------------------------------------------------------ the recorder
class TrainingStepRecorder:
    """Counts optimizer steps and measures each optimizer's first step (a context manager)."""

    def __init__(self, max_calls: int = 256, batch: tuple[int, int] | None = None) -> None:
        """``batch=(dry, paper)``: measure each step at the paper's batch size, on ``meta``, by
        giving every input tensor whose first dimension is the dry run's batch size the paper's
        (the dry run itself trains on its cut batch)."""
        # the recorded calls keep their inputs alive until the next optimizer step: bounded, so
        # that forwards with gradients on and no step (decoding, selection) cannot grow memory
        self.max_calls = max_calls
        self.batch = batch
        self.models: dict[str, dict[str, Any]] = {}
        self.unmeasured: list[str] = []
        self._calls: list[tuple[Any, tuple, dict, Any]] = []
        self._depth = 0
        self._measuring = False
        self._optimizers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
        self._handles: list[Any] = []

    # torch's global hooks --------------------------------------------------------------
    def __enter__(self) -> TrainingStepRecorder:
        import torch
        from torch.nn.modules import module as torch_module
        from torch.optim import optimizer as torch_optimizer

        self._torch = torch
        self._handles = [
            torch_module.register_module_forward_pre_hook(self._enter_forward),
            torch_module.register_module_forward_hook(self._leave_forward, with_kwargs=True,
                                                      always_call=True),
            torch_optimizer.register_optimizer_step_pre_hook(self._before_step),
        ]
        return self

    def __exit__(self, *exc: Any) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self._calls = []

    def _enter_forward(self, module: Any, args: Any) -> None:
        if not self._measuring:
            self._depth += 1

    def _leave_forward(self, module: Any, args: Any, kwargs: Any, output: Any = None) -> None:
        if self._measuring:
            return
        self._depth = max(0, self._depth - 1)
        if self._depth or not self._torch.is_grad_enabled():
            return
        if not any(p.requires_grad for p in module.parameters()):
            return
        torch = self._torch
        amp = torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else None
        self._calls.append((weakref.ref(module), tuple(args), dict(kwargs), amp))
        del self._calls[:-self.max_calls]

    def _before_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if self._measuring:
            return
        key = self._optimizers.get(optimizer)
        if key is None:
            key = self._measure(optimizer)
            self._optimizers[optimizer] = key
        if key in self.models:
            self.models[key]["dry_run_steps"] += 1
        self._calls = []

    def _measure_call(self, module: Any, args: tuple, kwargs: dict, amp: Any = None) -> Any:
        """One recorded call's cost; ``amp``: the CPU autocast dtype it ran under (bf16 for a
        config with ``amp: true``), used where the step is measured on the CPU."""
        from dataclasses import replace
        from functools import partial

        from icml25.core.training_cost import map_tensors
        from icml25.core.training_cost import measure_training_step as measure

        measure_training_step = partial(measure, autocast_dtype=amp)
        if self.batch is None or self.batch[0] == self.batch[1]:
            return measure_training_step(module, args, kwargs)
        dry, paper = self.batch
        resized = [0]

        def at_paper_batch(tensor: Any) -> Any:
            shape = list(tensor.shape)
            if shape and shape[0] == dry:
                shape[0] = paper
                resized[0] += 1
            meta = self._torch.empty(shape, dtype=tensor.dtype, device="meta")
            return meta.requires_grad_(tensor.requires_grad) if tensor.is_floating_point() else meta

        meta_args = map_tensors(args, at_paper_batch)
        meta_kwargs = map_tensors(kwargs, at_paper_batch)
        if not resized[0]:  # another batch (a second model of the room): measured as it ran
            cost = measure_training_step(module, args, kwargs)
            return replace(cost, method=f"{cost.method}, at the batch it ran (no input has the "
                                        f"dry run's batch {dry} first)")
        try:
            cost = measure_training_step(module, meta_args, meta_kwargs, allow_cpu=False)
            return replace(cost, method=f"{cost.method}, at the paper's batch {paper}")
        except Exception as exc:
            # measured at the dry run's batch, then scaled: a step's matrix products and the
            # tensors it saves are linear in the batch size (the parameters are not)
            cost = measure_training_step(module, args, kwargs)
            ratio = paper / dry
            return replace(
                cost, forward_flops=round(cost.forward_flops * ratio),
                backward_flops=round(cost.backward_flops * ratio),
                activation_bytes=round(cost.activation_bytes * ratio),
                method=(f"computed: {cost.method.removeprefix('measured: ')} at the dry run's "
                        f"batch {dry}, × {paper}/{dry} for the paper's batch (meta at "
                        f"{paper} failed: {str(exc)[:100]})"))

    def _measure(self, optimizer: Any) -> str:
        from icml25.core.training_cost import StepCost

        owned = {id(p) for group in optimizer.param_groups for p in group["params"]}
        calls = [(module, args, kwargs, amp) for ref, args, kwargs, amp in self._calls
                 if (module := ref()) is not None
                 and any(id(p) in owned for p in module.parameters())]
        optimizer_name = type(optimizer).__name__
        if not calls:
            self.unmeasured.append(f"{optimizer_name}: no forward call with gradients on its "
                                   "parameters was seen before its first step")
            return f"unmeasured:{optimizer_name}"
        self._measuring = True
        try:
            costs = [self._measure_call(module, args, kwargs, amp)
                     for module, args, kwargs, amp in calls]
        except Exception as exc:  # reported, never fatal: the dry run itself still ran
            self.unmeasured.append(f"{type(calls[0][0]).__name__}: {type(exc).__name__}: {exc}")
            return f"unmeasured:{type(calls[0][0]).__name__}"
        finally:
            self._measuring = False
        modules = {id(m): m for m, _a, _k, _amp in calls}
        # a network called whole in one pass and layer by layer in another (interval bound
        # propagation) holds each parameter once
        params = sum(p.numel() for p in {id(p): p for m in modules.values()
                                           for p in m.parameters()}.values())
        trainable = sum(p.numel() for p in {id(p): p for group in optimizer.param_groups
                                             for p in group["params"]}.values())
        cost = StepCost(
            parameters=params, trainable_parameters=trainable,
            forward_flops=sum(c.forward_flops for c in costs),
            backward_flops=sum(c.backward_flops for c in costs),
            activation_bytes=sum(c.activation_bytes for c in costs),
            method=costs[0].method, dtype=costs[0].dtype,
            input_shapes=[c.input_shapes for c in costs])
        names = "+".join(sorted({type(m).__name__ for m in modules.values()}))
        key = f"{names}|{params}|{json.dumps(cost.input_shapes)}|{optimizer_name}"
        if key not in self.models:
            self.models[key] = {"model": names, "optimizer": optimizer_name,
                                "calls_per_step": len(calls), **cost.as_dict(),
                                "dry_run_steps": 0, "optimizers": 0}
        self.models[key]["optimizers"] += 1
        return key


# ------------------------------------------------------------------------ the step formula
def _lookup(tree: Mapping[str, Any], dotted: str, where: str) -> Any:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            raise KeyError(f"{where}: no parameter {dotted!r} (at {part!r})")
        node = node[part]
    return node


def _get(tree: Mapping[str, Any], dotted: str) -> Any:
    try:
        return _lookup(tree, dotted, "")
    except KeyError:
        return None


def count_from_parameters(factors: list[Any], tree: Mapping[str, Any], where: str) -> int:
    """Π of ``factors`` over ``tree``: an int is itself, a dotted key its value (a list's or a
    mapping's length), a list of factors their sum."""
    total: float = 1
    for factor in factors:
        total *= _factor(factor, tree, where)
    return round(total)


_FACTORS = ("a factor is an int, a parameter key, a list (a sum), {product: [...]}, "
            "{ceil_div: [a, b]} or {first: [...]} (the first that is not null)")


def _factor(factor: Any, tree: Mapping[str, Any], where: str) -> float:
    if isinstance(factor, bool):
        raise TypeError(f"{where}: {_FACTORS}; got {factor!r}")
    if isinstance(factor, int):
        return factor
    if isinstance(factor, list):
        return sum(_factor(item, tree, where) for item in factor)
    if isinstance(factor, Mapping) and len(factor) == 1:
        (op, items), = factor.items()
        if op == "ceil_div" and isinstance(items, list) and len(items) == 2:
            numerator, denominator = (_factor(item, tree, where) for item in items)
            if denominator <= 0:
                raise ValueError(f"{where}: ceil_div by {denominator}")
            return math.ceil(round(numerator / denominator, 9))
        if op == "product" and isinstance(items, list):
            return math.prod(_factor(item, tree, where) for item in items)
        if op == "first" and isinstance(items, list) and items:
            for item in items:  # a key the config does not set is null (its model's default)
                if not isinstance(item, str) or _get(tree, item) is not None:
                    return _factor(item, tree, where)
            raise ValueError(f"{where}: every entry of first: {items} is null")
    if isinstance(factor, str):
        value = _lookup(tree, factor, where)
        if isinstance(value, list | tuple | Mapping):
            return len(value)
        if value is None:
            return 0
        if isinstance(value, int | float):  # a bool counts 0 or 1 (enabled or not); a float
            return value                      # (a fraction) stays one until the product ends
        raise TypeError(f"{where}: parameter {factor!r} is {value!r}, not a count")
    raise TypeError(f"{where}: {_FACTORS}; got {factor!r}")


# ------------------------------------------------------------------------------ the report
def paper_report(room: str, models: list[dict[str, Any]], spec: Mapping[str, Any] | None,
                 paper_params: Mapping[str, Any], dry_params: Mapping[str, Any], *,
                 wall_seconds: float, peak_rss_bytes: int, layers: list[str],
                 unmeasured: list[str],
                 node_seconds: Mapping[str, float] | None = None) -> dict[str, Any]:
    """The ``paper_check.json`` document of one room."""
    from icml25.core.training_cost import DEFAULT_MFU, h100_estimate, steps_weighted_mean

    dry_steps = sum(m["dry_run_steps"] for m in models)
    # one line per distinct problem: a room that builds a new optimizer per path or per round
    # (sgd_hitting's gMAM makes an LBFGS for each) repeats the same one many times
    repeats = Counter(unmeasured)
    unmeasured = [text if n == 1 else f"{text} (× {n})" for text, n in repeats.items()]
    report: dict[str, Any] = {
        "room": room, "layers": layers,
        "dry_run": {"wall_seconds": round(wall_seconds, 2), "peak_rss_bytes": peak_rss_bytes,
                    "optimizer_steps": dry_steps, "device": "cpu"},
        "models": models, "unmeasured": unmeasured,
        "node_seconds": {k: round(v, 3) for k, v in (node_seconds or {}).items()},
    }
    if spec and spec.get("generators"):
        report["generators"] = generator_throughput(room, spec["generators"], paper_params,
                                                    dry_params, node_seconds or {})
    if not models:
        report["paper"] = {"note": "no training step was seen in the dry run (a room that "
                                   "trains no network, or an optimizer outside torch.optim)"}
        return report
    flops = steps_weighted_mean((m["flops"], m["dry_run_steps"]) for m in models)
    largest = max(models, key=lambda m: (m["parameters"], m["activation_bytes"]))
    report["per_step"] = {
        "parameters": largest["parameters"], "flops": flops,
        "activation_bytes": largest["activation_bytes"],
        "method": largest["method"],
        "note": ("FLOPs/step: steps-weighted mean over the models the dry run trained; "
                 "parameters and activations: the largest of them"),
    }
    if not spec:
        report["paper"] = {"note": f"no paper_check.{room} step formula: no H100 estimate"}
        return report
    where = f"paper_check.{room}"
    steps_f, runs_f = list(spec.get("steps", [])), list(spec.get("runs", []))
    micro_f = list(spec.get("micro_batches", []))
    per_run_paper = count_from_parameters(steps_f, paper_params, where + ".steps (paper)")
    per_run_dry = count_from_parameters(steps_f, dry_params, where + ".steps (dry run)")
    if "runs_scale" in spec:
        # the runs the dry run trained (one optimizer each), scaled by the ratio of the keys
        scale_f = list(spec["runs_scale"])
        optimizers = sum(m["optimizers"] for m in models)
        ratio = (count_from_parameters(scale_f, paper_params, where + ".runs_scale (paper)")
                 / max(1, count_from_parameters(scale_f, dry_params,
                                                where + ".runs_scale (dry run)")))
        runs_paper, runs_dry = round(optimizers * ratio), optimizers
        runs_note = (f"{optimizers} runs in the dry run × {ratio:g} (paper ÷ dry run of "
                     f"{scale_f}): approximate")
    else:
        runs_paper = count_from_parameters(runs_f, paper_params, where + ".runs (paper)")
        runs_dry = count_from_parameters(runs_f, dry_params, where + ".runs (dry run)")
        runs_note = f"Π {runs_f}"
    paper_steps = per_run_paper * runs_paper
    formula_dry = per_run_dry * runs_dry
    activation_bytes = largest["activation_bytes"]
    if micro_f:
        # gradient accumulation: the paper's step runs more micro-batches than the dry run's,
        # and each micro-batch's backward frees its graph before the next forward, so the
        # step's peak holds one micro-batch's saved tensors (the recorder summed the dry run's)
        dry_micro = max(1, count_from_parameters(micro_f, dry_params,
                                                 where + ".micro_batches (dry run)"))
        micro = count_from_parameters(micro_f, paper_params,
                                      where + ".micro_batches (paper)") / dry_micro
        flops *= micro
        activation_bytes = round(activation_bytes / dry_micro)
        report["per_step"]["flops"] = flops
        report["per_step"]["activation_bytes"] = activation_bytes
        report["per_step"]["note"] += (f"; × {micro:g} micro-batches per step ({micro_f}); "
                                       f"activations: one micro-batch's (the dry run's "
                                       f"{dry_micro} summed ÷ {dry_micro})")
    mfu = float(spec.get("mfu", DEFAULT_MFU))
    estimate = h100_estimate(flops_per_step=flops, steps=paper_steps,
                             parameters=largest["parameters"],
                             activation_bytes=activation_bytes, mfu=mfu)
    report["paper"] = {
        "steps_formula": {"steps": steps_f, "runs": runs_f or runs_note},
        "steps_per_run": per_run_paper, "runs": runs_paper, "steps": paper_steps, "dry_run_steps_by_formula": formula_dry,
        "steps_formula_matches_dry_run": formula_dry == dry_steps,
    }
    report["h100"] = estimate
    return report


def generator_throughput(room: str, generators: Mapping[str, list[Any]],
                         paper_params: Mapping[str, Any], dry_params: Mapping[str, Any],
                         node_seconds: Mapping[str, float]) -> dict[str, Any]:
    """Items per second of each data-generating node in the dry run (one CPU core), and the
    paper config's items at that rate (linear in the item count)."""
    out: dict[str, Any] = {}
    for name, factors in generators.items():
        where = f"paper_check.{room}.generators.{name}"
        seconds = node_seconds.get(f"{room}.{name}", node_seconds.get(name))
        dry_items = count_from_parameters(list(factors), dry_params, where + " (dry run)")
        paper_items = count_from_parameters(list(factors), paper_params, where + " (paper)")
        entry: dict[str, Any] = {"items": factors, "dry_run_items": dry_items,
                                 "dry_run_seconds": seconds, "paper_items": paper_items}
        if seconds is None:
            entry["note"] = f"node {room}.{name} did not run"
        elif dry_items and seconds > 0:
            rate = dry_items / seconds
            paper_seconds = paper_items / rate
            entry |= {"items_per_second": rate, "paper_seconds_one_core": paper_seconds,
                      "over_one_hour": paper_seconds > 3600,
                      "arithmetic": f"{paper_items:,} items ÷ ({dry_items:,} items ÷ "
                                    f"{seconds:.2f} s) = {paper_seconds:,.0f} s on one core"}
        out[name] = entry
    return out


def peak_rss_bytes() -> int:
    """This process's peak resident memory (``ru_maxrss``: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(peak if sys.platform == "darwin" else peak * 1024)


# -------------------------------------------------------------------------------- the hook
class PaperCheckHook:
    """In a dry-run environment: record the run's training steps and write each room's
    ``paper_check.json`` (and log it to MLflow) when the pipeline ends."""

    def __init__(self) -> None:
        self._loader: Any = None
        self._project_path = Path(".")
        self._recorder: TrainingStepRecorder | None = None
        self._rooms: list[str] = []
        self._start = 0.0

    @hook_impl
    def after_context_created(self, context: Any) -> None:
        self._loader = None
        loader = context.config_loader
        if is_cpu_dry_run(loader):
            self._loader = loader
            self._project_path = Path(context.project_path)

    @hook_impl
    def before_pipeline_run(self, pipeline: Any) -> None:
        if self._loader is None:
            return
        from icml25.pipeline_registry import paper_pipeline_names

        names = {name.split(":", 1)[1].split(".", 1)[0] for name in pipeline.inputs()
                 if name.startswith("params:")}
        self._rooms = sorted(names & set(paper_pipeline_names()))
        self._node_seconds: dict[str, float] = {}
        self._node_start: dict[str, float] = {}
        batch = None
        if len(self._rooms) == 1:
            room = self._rooms[0]
            spec = (self._loader["parameters"].get("paper_check") or {}).get(room) or {}
            if spec.get("batch"):
                where = f"paper_check.{room}.batch"
                batch = (count_from_parameters(spec["batch"], self._loader["parameters"][room],
                                               where + " (dry run)"),
                         count_from_parameters(spec["batch"], self._paper_parameters()[room],
                                               where + " (paper)"))
        self._recorder = TrainingStepRecorder(batch=batch).__enter__()
        self._start = time.perf_counter()

    def _paper_parameters(self) -> dict[str, Any]:
        """The parameters of the dry run's parent environment: the paper config itself."""
        loader = self._loader
        layers = loader.environments() if hasattr(loader, "environments") else [loader.env]
        parent = layers[-2] if len(layers) > 1 else layers[-1]
        return type(loader)(conf_source=str(loader.conf_source), env=parent,
                            base_env=loader.base_env, default_run_env=loader.default_run_env,
                            config_patterns=loader.config_patterns,
                            merge_strategy=loader.merge_strategy)["parameters"]

    @hook_impl
    def before_node_run(self, node: Any) -> None:
        if self._recorder is not None:
            self._node_start[node.name] = time.perf_counter()

    @hook_impl
    def after_node_run(self, node: Any) -> None:
        if self._recorder is not None and node.name in self._node_start:
            self._node_seconds[node.name] = time.perf_counter() - self._node_start.pop(node.name)

    @hook_impl
    def on_pipeline_error(self) -> None:
        if self._recorder is not None:
            self._recorder.__exit__(None, None, None)
            self._recorder = None

    @hook_impl(tryfirst=True)  # before kedro-mlflow closes the run's MLflow run
    def after_pipeline_run(self) -> None:
        if self._recorder is None or self._loader is None:
            return
        recorder, self._recorder = self._recorder, None
        recorder.__exit__(None, None, None)
        wall = time.perf_counter() - self._start
        loader = self._loader
        layers = loader.environments() if hasattr(loader, "environments") else [loader.env]
        dry = loader["parameters"]
        paper = self._paper_parameters()
        root = self._project_path / loader["globals"].get("data_root", "data")
        models = list(recorder.models.values())
        if len(self._rooms) > 1:
            logger.warning("paper_check: %d rooms ran in one session; each report lists the "
                           "models of all of them", len(self._rooms))
        for room in self._rooms:
            spec = (dry.get("paper_check") or {}).get(room)
            kwargs = {"wall_seconds": wall, "peak_rss_bytes": peak_rss_bytes(),
                      "layers": layers, "unmeasured": recorder.unmeasured,
                      "node_seconds": self._node_seconds}
            try:
                report = paper_report(room, models, spec, paper.get(room, {}),
                                      dry.get(room, {}), **kwargs)
            except (KeyError, TypeError, ValueError) as exc:
                # a wrong step formula must not lose what the dry run measured: report it
                logger.error("paper_check.%s: %s", room, exc)
                report = paper_report(room, models, None, paper.get(room, {}),
                                      dry.get(room, {}), **kwargs)
                report["paper"] = {"error": f"paper_check.{room}: {exc}"}
            out = root / "08_reporting" / room / REPORT_NAME
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(report, indent=2, sort_keys=False) + "\n")
            logger.info("paper_check: wrote %s", out)
            _log_to_mlflow(room, report)


def _log_to_mlflow(room: str, report: Mapping[str, Any]) -> None:
    import mlflow

    if mlflow.active_run() is None:
        return
    metrics = {"paper_check.dry_run_seconds": report["dry_run"]["wall_seconds"],
               "paper_check.dry_run_peak_rss_bytes": report["dry_run"]["peak_rss_bytes"]}
    step = report.get("per_step") or {}
    for key in ("parameters", "flops", "activation_bytes"):
        if key in step:
            metrics[f"paper_check.{key}_per_step" if key != "parameters"
                    else "paper_check.parameters"] = float(step[key])
    h100 = report.get("h100") or {}
    if h100:
        metrics["paper_check.h100_hours"] = h100["hours"]
        metrics["paper_check.h100_memory_bytes"] = h100["memory_bytes"]
    mlflow.log_metrics(metrics)
    mlflow.log_dict(dict(report), f"paper_check/{room}.json")


PAPER_CHECK_HOOKS = (PaperCheckHook(),)
"""Registered in ``settings.py``; inactive outside a ``cpu_dry_run`` environment."""
