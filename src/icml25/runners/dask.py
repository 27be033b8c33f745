"""Run any icml25 pipeline on a Dask distributed cluster.

``kedro run --pipeline=<name> --runner=icml25.runners.DaskRunner`` submits every node as one Dask
task, in dependency order, so nodes that do not depend on each other (seeds and variants in
their own namespaces, independent data sets, whole papers in ``__default__``) run at the same
time on different workers. This follows Kedro's "distributed deployment with Dask" guide: nodes
become ``client.submit`` calls whose upstream futures are their arguments.

Where the cluster is: ``conf/<env>/dask.yml`` (read through the Kedro config loader by
:class:`icml25.hooks.DaskConfigHook`), overridden by ``--runner-params``::

    address: null            # tcp://scheduler:8786 of a running cluster; null = a LocalCluster
    n_workers: 2             # LocalCluster only
    threads_per_worker: 1    # LocalCluster only

Data flow. Persistent data sets (files) are loaded and saved by the worker that runs the node,
so a remote cluster needs the project at the same path on every worker and a shared file system
(start ``dask worker`` from the project root). In-memory data sets travel between workers as
Dask results without passing through the client; parameters and other free in-memory inputs are
sent from the client.

MLflow. When the Kedro run has an active MLflow run (kedro-mlflow's parent run), each worker
re-enters that run while its node executes, so the child runs a node opens are nested under the
same parent as with the sequential runner.

Hooks. Like Kedro's ``ParallelRunner``, node- and data-set-level hooks are not called on the
workers; pipeline-level hooks (MLflow run, experiment naming, parameter validation) run on the
client as usual.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

from kedro.pipeline import Pipeline
from kedro.pipeline.node import Node
from kedro.runner import AbstractRunner
from tqdm.auto import tqdm

MALLOC_TRIM = "MALLOC_TRIM_THRESHOLD_"
"""The glibc variable that Dask's nanny sets to 65536 on every worker (``distributed.nanny.
pre-spawn-environ``) so that freed memory goes back to the system at once. Setting it also turns
off glibc's adaptive mmap threshold, so every allocation above 128 KiB (a torch activation or
gradient) is a fresh ``mmap`` whose pages fault in again at every step. Measured here: 60 steps of
a small CNN in a thread took 5.9-6.3 s with the variable against 2.9-3.3 s without, with 6.5x the
page faults; on a 2-worker LocalCluster of this 2-core machine the kernel time reached half of
all CPU time and steerable's training ran at 1.5 it/s against 5.0 it/s sequentially. The
LocalCluster that :class:`DaskRunner` starts leaves the variable unset; for a cluster it only
connects to, it warns when a worker has it."""

logger = logging.getLogger(__name__)

DEFAULTS: dict[str, Any] = {"address": None, "n_workers": 2, "threads_per_worker": 1}
_configured: dict[str, Any] = {}


def configure(config: Mapping[str, Any] | None) -> None:
    """Set the cluster settings from ``conf/<env>/dask.yml`` (called by the project hook)."""
    _configured.clear()
    if config:
        unknown = set(config) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"dask.yml: unknown keys {sorted(unknown)}; expected {sorted(DEFAULTS)}")
        _configured.update(config)


def _is_memory(catalog: Any, name: str) -> bool:
    dataset = catalog.get(name, fallback_to_runtime_pattern=True)
    return bool(getattr(dataset, "_EPHEMERAL", False))


def _run_node_on_worker(
    node: Node,
    datasets: dict[str, Any],
    free_inputs: dict[str, Any],
    upstream: list[dict[str, Any]],
    mlflow_parent: tuple[str, str] | None,
) -> dict[str, Any]:
    """Run one node on a worker: load its inputs, run it, save its persistent outputs and
    return the in-memory ones (they become the input of downstream tasks)."""
    run = None
    if mlflow_parent is not None:
        import mlflow

        uri, run_id = mlflow_parent
        mlflow.set_tracking_uri(uri)
        run = mlflow.start_run(run_id=run_id)
    try:
        memory: dict[str, Any] = {}
        for produced in upstream:
            memory.update(produced)
        memory.update(free_inputs)
        inputs = {name: memory[name] if name in memory else datasets[name].load()
                  for name in node.inputs}
        outputs = node.run(inputs)
        returned = {}
        for name, value in outputs.items():
            if name in datasets:
                datasets[name].save(value)  # inside the run: MLflow data sets log to the parent
            else:
                returned[name] = value
    finally:
        if run is not None:
            import mlflow

            # leave the parent open: the client's kedro-mlflow run ends it
            mlflow.end_run(status="RUNNING")
    return returned


class DaskRunner(AbstractRunner):
    """A Kedro runner that executes a pipeline's nodes as tasks on a Dask distributed cluster.

    Args:
        address: scheduler address of a running cluster; ``None`` starts a ``LocalCluster``.
        n_workers, threads_per_worker: size of the ``LocalCluster`` (ignored with ``address``).
        is_async: accepted for ``kedro run`` compatibility; loading and saving happen on the
            workers, so it has no effect.
    Values not given here come from ``conf/<env>/dask.yml``, then from :data:`DEFAULTS`.
    """

    def __init__(self, address: str | None = None, n_workers: int | None = None,
                 threads_per_worker: int | None = None, is_async: bool = False) -> None:
        super().__init__(is_async=is_async)
        given = {"address": address, "n_workers": n_workers,
                 "threads_per_worker": threads_per_worker}
        self._given = {k: v for k, v in given.items() if v is not None}

    def settings(self) -> dict[str, Any]:
        """The effective cluster settings (arguments > dask.yml > defaults), validated."""
        merged = {**DEFAULTS, **_configured, **self._given}
        for key in ("n_workers", "threads_per_worker"):
            value = merged[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"dask.{key}: got {value!r}; expected a positive integer")
        return merged

    def _get_executor(self, max_workers: int) -> None:  # pragma: no cover - not used
        return None

    def _connect(self):
        from distributed import Client, LocalCluster

        cfg = self.settings()
        if cfg["address"]:
            self._logger.info("Connecting to the Dask scheduler at %s", cfg["address"])
            return Client(cfg["address"]), None
        import dask

        # the nannies read pre-spawn-environ when they are built, inside this block
        with dask.config.set({f"distributed.nanny.pre-spawn-environ.{MALLOC_TRIM}": None}):
            cluster = LocalCluster(
                n_workers=cfg["n_workers"], threads_per_worker=cfg["threads_per_worker"],
                processes=True, dashboard_address=None, silence_logs=logging.WARNING,
            )
        self._logger.info("Started a LocalCluster with %d workers x %d threads",
                          cfg["n_workers"], cfg["threads_per_worker"])
        return Client(cluster), cluster

    def _check_worker_malloc(self, client: Any) -> None:
        """Warn when a worker runs with ``MALLOC_TRIM_THRESHOLD_`` set (see :data:`MALLOC_TRIM`)."""
        try:
            found = client.run(_environ_value, MALLOC_TRIM)
        except Exception as exc:  # pragma: no cover - a worker that cannot answer
            self._logger.debug("could not read the workers' environment: %s", exc)
            return
        trimmed = sorted(worker for worker, value in found.items() if value is not None)
        if trimmed:
            self._logger.warning(
                "%d Dask worker(s) run with %s set (%s): glibc then maps every allocation above "
                "128 KiB afresh and torch training runs about 2x slower; start them with the "
                "Dask config distributed.nanny.pre-spawn-environ.%s: null",
                len(trimmed), MALLOC_TRIM, found[trimmed[0]], MALLOC_TRIM)

    def _run(self, pipeline: Pipeline, catalog: Any, hook_manager: Any = None,
             run_id: str | None = None) -> None:
        from distributed import as_completed

        parent = _mlflow_parent()
        nodes = pipeline.nodes  # topologically sorted
        dependencies = pipeline.node_dependencies
        memory = {name for name in pipeline.datasets() if _is_memory(catalog, name)}
        produced = set(pipeline.all_outputs())
        client, cluster = self._connect()
        futures: dict[Node, Any] = {}
        try:
            self._check_worker_malloc(client)
            for node in nodes:
                datasets = {name: catalog.get(name, fallback_to_runtime_pattern=True)
                            for name in (*node.inputs, *node.outputs) if name not in memory}
                free = {name: catalog.load(name) for name in node.inputs
                        if name in memory and name not in produced}
                upstream = [futures[parent_node] for parent_node in
                            sorted(dependencies[node], key=lambda n: n.name)]
                futures[node] = client.submit(
                    _run_node_on_worker, node, datasets, free, upstream, parent,
                    key=f"{node.name}-{os.urandom(4).hex()}", pure=False,
                )
            by_future = {future.key: node for node, future in futures.items()}
            with tqdm(total=len(nodes), desc="dask nodes", dynamic_ncols=True) as bar:
                for future in as_completed(list(futures.values())):
                    node = by_future[future.key]
                    try:
                        future.result()
                    except Exception:
                        self._logger.error("Node %s failed on a Dask worker", node.name)
                        for other in futures.values():
                            other.cancel()
                        raise
                    self._logger.info("Completed node: %s", node.name)
                    bar.update(1)
            # in-memory results nobody consumed are the pipeline's outputs: hand them back
            outputs = pipeline.outputs()
            for future in futures.values():
                for name, value in future.result().items():
                    if name in outputs:
                        catalog.save(name, value)
        finally:
            client.close()
            if cluster is not None:
                cluster.close()


def _environ_value(name: str) -> str | None:
    """``os.environ.get(name)`` where it runs. (A bound ``os.environ.get`` sent with
    ``client.run`` would carry a pickled copy of the client's environment instead.)"""
    return os.environ.get(name)


def _mlflow_parent() -> tuple[str, str] | None:
    try:
        import mlflow
    except ImportError:  # pragma: no cover - mlflow is a project dependency
        return None
    active = mlflow.active_run()
    if active is None:
        return None
    return mlflow.get_tracking_uri(), active.info.run_id
