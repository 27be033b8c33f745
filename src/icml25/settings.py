"""Kedro settings of icml25."""

from icml25.core.config_loader import ProjectConfigLoader
from icml25.core.credentials import CREDENTIALS_HOOKS
from icml25.core.paper_check import PAPER_CHECK_HOOKS
from icml25.hooks import HOOKS as PROJECT_HOOKS
from icml25.preflight import PREFLIGHT_HOOKS

# Built when a session registers its hooks (icml25.hooks.DeferredHooks), so that this module, read
# by every `kedro` command, imports neither kedro-mlflow nor MLflow: add hooks with `+`, since
# unpacking HOOKS into a tuple would build them here.
HOOKS = PROJECT_HOOKS
# start-of-run checks (--env, --params namespaces, writable outputs) after the project's hooks
HOOKS = HOOKS + PREFLIGHT_HOOKS
# a malformed conf/<env>/credentials.yml is refused in one line before the catalog is built
HOOKS = HOOKS + CREDENTIALS_HOOKS
# in a CPU dry-run environment (conf/paper_check): each room's paper_check.json (docs/scale.md)
HOOKS = HOOKS + PAPER_CHECK_HOOKS
# kedro-mlflow's hook runs as icml25.hooks.MlflowParamsOnceHook (same behaviour, fewer calls)
DISABLE_HOOKS_FOR_PLUGINS = ("kedro_mlflow",)

# OmegaConfigLoader, with the parameters read as plain data (about 1.2 s less per kedro command)
CONFIG_LOADER_CLASS = ProjectConfigLoader
CONFIG_LOADER_ARGS = {
    "base_env": "base",
    "default_run_env": "local",
    "config_patterns": {
        "mlflow": ["mlflow*", "mlflow*/**", "**/mlflow*"],
        "dask": ["dask*", "dask*/**"],
    },
    # conf/test and conf/paper override single keys of a pipeline's tree, not the whole tree
    "merge_strategy": {"parameters": "soft", "mlflow": "soft", "dask": "soft"},
}
