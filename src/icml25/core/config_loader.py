"""Kedro's ``OmegaConfigLoader`` with a fast path for the project's parameters.

Every ``kedro run`` reads every room's ``parameters_*.yml`` (about 40 files, 4,000 lines, in
base and the run's environment). ``OmegaConfigLoader`` builds an OmegaConf tree of each file,
merges the trees and converts the result back to plain Python: about 1.3 s on a 2-core machine,
the largest single cost before a run's first node, while parsing the same files with libyaml
takes under 0.1 s. :class:`ProjectConfigLoader` reads ``parameters`` as plain data (libyaml, with
OmegaConf's own YAML rules: its float syntax, no timestamps, duplicate keys refused), merges it
the way OmegaConf does (files of one environment must not share a key; the run's environment is
merged over base key by key under ``soft``, top-level key by key under ``destructive``) and
resolves ``${globals:key}``, the one interpolation the parameters use.

Anything else goes to ``OmegaConfigLoader`` unchanged: every key but ``parameters``, runtime
parameters (``--params``), any other interpolation or resolver, OmegaConf's ``???``, a
non-local ``conf_source``, a value YAML types beyond str/int/float/bool/None/list/dict, and every
case where Kedro raises (invalid YAML, duplicate keys, missing files), so that its error messages
stay Kedro's. ``tests/core/test_config_loader.py`` checks that both give equal parameters (values
and types) in every environment.

Layered environments. An environment may declare a parent in its ``globals.yml``
(``_parent: paper``; Kedro ignores top-level keys that start with ``_``): its configuration is then
base, then the parent's chain, then its own files, each layer merged over the one below with the
key's merge strategy, for every key (``parameters``, ``catalog``, ``globals``, ``mlflow``,
``dask``, ``credentials``), on the fast path and on OmegaConf's path alike; ``--params`` stays on
top. ``conf/paper_check`` (base -> paper -> paper_check) is the CPU dry run of the paper-scale
configs. A parent that is no folder, a cycle, or a ``_parent`` that is no name is refused with
:class:`EnvironmentLayerError`, naming the ``globals.yml`` that declares it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from kedro.config import OmegaConfigLoader

_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_GLOBAL = re.compile(r"\$\{globals:([A-Za-z0-9][A-Za-z0-9_.]*)\}")


PARENT_KEY = "_parent"


class EnvironmentLayerError(ValueError):
    """An environment's declared parent (``_parent`` in its globals.yml) cannot be layered."""


def environment_chain(conf_source: str | Path, base_env: str, run_env: str) -> list[str]:
    """The environments whose files make up ``run_env``'s configuration, lowest first.

    ``[base_env]`` for base itself, ``[base_env, run_env]`` for an environment without a parent,
    and ``[base_env, ..., parent, run_env]`` along the ``_parent`` keys of the environments'
    ``globals.yml`` files (a parent equal to ``base_env`` adds nothing)."""
    conf = Path(conf_source)
    if run_env == base_env:
        return [base_env]
    chain = [run_env]
    while True:
        declaring = conf / chain[0] / "globals.yml"
        parent = _declared_parent(declaring)
        if parent is None or parent == base_env:
            return [base_env, *chain]
        if parent in chain:
            cycle = " -> ".join([*reversed(chain), parent])
            raise EnvironmentLayerError(
                f"{declaring}: {PARENT_KEY}: {parent!r} makes a cycle of environments ({cycle})")
        if not (conf / parent).is_dir():
            raise EnvironmentLayerError(
                f"{declaring}: {PARENT_KEY}: {parent!r} names no environment: there is no "
                f"folder {conf / parent}")
        chain.insert(0, parent)


def _declared_parent(globals_file: Path) -> str | None:
    if not globals_file.is_file():
        return None
    try:
        loaded = yaml.load(globals_file.read_text(encoding="utf8"), Loader=_SAFE_LOADER)
    except yaml.YAMLError:
        return None  # Kedro reports the invalid YAML in its own words when it reads globals
    if not isinstance(loaded, dict) or PARENT_KEY not in loaded:
        return None
    parent = loaded[PARENT_KEY]
    if not isinstance(parent, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]*", parent):
        raise EnvironmentLayerError(
            f"{globals_file}: {PARENT_KEY} must name an environment (a folder of "
            f"{globals_file.parent.parent}); got {parent!r}")
    return parent


class _Fallback(Exception):
    """This configuration needs OmegaConf itself."""


class _OmegaConfRules(_SAFE_LOADER):  # type: ignore[misc, valid-type]
    """libyaml with OmegaConf's implicit types (``omegaconf._utils.get_yaml_loader``)."""

    def construct_mapping(self, node: yaml.Node, deep: bool = False) -> Any:
        keys = set()
        for key_node, _value in node.value:
            if key_node.tag != yaml.resolver.BaseResolver.DEFAULT_SCALAR_TAG:
                continue
            if key_node.value in keys:
                raise _Fallback(f"duplicate key {key_node.value}")
            keys.add(key_node.value)
        return super().construct_mapping(node, deep=deep)


_OmegaConfRules.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        """^(?:
     [-+]?[0-9]+(?:_[0-9]+)*\\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?:[eE][-+]?[0-9]+)
    |\\.[0-9]+(?:_[0-9]+)*(?:[eE][-+][0-9]+)?
    |[-+]?[0-9]+(?:_[0-9]+)*(?::[0-5]?[0-9])+\\.[0-9_]*
    |[-+]?\\.(?:inf|Inf|INF)
    |\\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)
_OmegaConfRules.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _OmegaConfRules.yaml_implicit_resolvers.items()
}


def _plain(value: Any) -> Any:
    """``value`` itself when it holds only the types OmegaConf gives back unchanged."""
    if isinstance(value, dict):
        for key in value:
            if not isinstance(key, str):
                raise _Fallback("a non-string key")
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    if isinstance(value, str):
        if value == "???" or "${" in _GLOBAL.sub("", value) or "\\$" in value:
            raise _Fallback("an interpolation other than ${globals:...} or OmegaConf's ???")
        return value
    if value is None or isinstance(value, bool | int | float):
        return value
    raise _Fallback(f"a {type(value).__name__} value")


def _leaf_keys(tree: dict[str, Any], parent: str = "") -> set[str]:
    """Dotted paths of the leaves, as ``OmegaConfigLoader._get_all_keys``."""
    keys: set[str] = set()
    for key, value in tree.items():
        full = f"{parent}.{key}" if parent else key
        keys |= _leaf_keys(value, full) if isinstance(value, dict) else {full}
    return keys


def _merge(base: Any, over: Any) -> Any:
    """OmegaConf's merge of plain trees: mappings key by key, anything else replaced."""
    if isinstance(base, dict) and isinstance(over, dict):
        merged = dict(base)
        for key, value in over.items():
            merged[key] = _merge(base[key], value) if key in base else value
        return merged
    return over


class ProjectConfigLoader(OmegaConfigLoader):
    """``OmegaConfigLoader``; ``parameters`` read without building OmegaConf trees; layered
    environments (``_parent`` in an environment's globals.yml) for every key."""

    def __getitem__(self, key: str) -> dict[str, Any]:
        if key == "parameters" and key not in self.data and not self.runtime_params:
            try:
                return self._plain_parameters()
            except _Fallback:
                pass
        chain = self.environments()
        if len(chain) <= 2 or key in self:
            return super().__getitem__(key)
        return self._layered(key, chain)

    def environments(self) -> list[str]:
        """The environments layered for this run, lowest first (base first); read from the
        globals files once per loader (every key's lookup asks for it)."""
        chain = self.__dict__.get("_environment_chain")
        if chain is None:
            run_env = self.env or self.default_run_env
            if self._protocol != "file":
                chain = [self.base_env] if run_env == self.base_env else [self.base_env, run_env]
            else:
                chain = environment_chain(self.conf_source, self.base_env, run_env)
            self.__dict__["_environment_chain"] = chain
        return list(chain)

    # ------------------------------------------------------------- OmegaConf's path, layered
    def _layered(self, key: str, chain: list[str]) -> dict[str, Any]:
        """``OmegaConfigLoader.__getitem__`` over more than two environments: each one's files
        merged and resolved as Kedro does, then merged over the layers below it."""
        from kedro.config import MissingConfigException
        from omegaconf import OmegaConf

        self._register_runtime_params_resolver()
        if key not in self.config_patterns:
            raise KeyError(f"No config patterns were found for '{key}' in your config loader")
        if key == "globals":
            OmegaConf.clear_resolver("runtime_params")  # as Kedro: not allowed in globals
        patterns = list(self.config_patterns[key])
        processed: set[Path] = set()
        config: dict[str, Any] | None = None
        paths = []
        for env in chain:
            path = self._get_conf_env_path(env)
            paths.append(path)
            files = self._read_dir_configs(path, patterns, key, processed, key == "credentials")
            layer = self._merge_and_resolve(key, files)
            config = layer if config is None else self._merge_configs(config, layer, key, path)
        if not processed and key != "globals":
            raise MissingConfigException(
                f"No files of YAML or JSON format found in {' or '.join(paths)} matching the "
                f"glob pattern(s): {patterns}")
        return config or {}

    # ------------------------------------------------------------------------ fast path
    def _plain_parameters(self) -> dict[str, Any]:
        if self._protocol != "file":
            raise _Fallback("a remote conf_source")
        patterns = list(self.config_patterns["parameters"])
        envs = self.environments()
        trees = [self._environment_tree(Path(self.conf_source) / env, patterns) for env in envs]
        if not any(found for _tree, found in trees):
            raise _Fallback("no parameter files: Kedro names them")
        config = trees[0][0]
        for env_tree, _found in trees[1:]:
            strategy = self.merge_strategy.get("parameters", "destructive")
            if strategy == "soft":
                config = _merge(config, env_tree)
            elif strategy == "destructive":
                config = {**config, **env_tree}
            else:
                raise _Fallback(f"merge strategy {strategy!r}")
        return config

    def _environment_tree(self, folder: Path, patterns: list[str]) -> tuple[dict[str, Any], bool]:
        if not folder.is_dir():
            raise _Fallback(f"{folder} is no folder: Kedro says so")
        paths = set()
        for pattern in patterns:
            for each in self._fs.glob((folder / pattern).as_posix()):
                if not self.ignore_hidden or not self._is_hidden(each):
                    paths.add(Path(each))
        files = {}
        for path in sorted(p for p in paths if self._is_valid_config_path(p)):
            try:
                loaded = yaml.load(path.read_text(encoding="utf8"), Loader=_OmegaConfRules)
            except yaml.YAMLError as exc:
                raise _Fallback(f"invalid YAML in {path}: Kedro names it") from exc
            if loaded is None:
                loaded = {}
            if not isinstance(loaded, dict):
                raise _Fallback(f"{path} is not a mapping")
            files[path] = self._resolve_globals(_plain(loaded))
        seen: set[str] = set()
        merged: dict[str, Any] = {}
        for tree in files.values():
            leaves = {k for k in _leaf_keys(tree) if not k.startswith("_")}
            if leaves & seen:
                raise _Fallback("files share a key: Kedro names them")
            seen |= leaves
            merged = _merge(merged, tree)
        return merged, bool(files)

    def _resolve_globals(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {key: self._resolve_globals(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self._resolve_globals(item) for item in value]
        if not isinstance(value, str) or "${" not in value:
            return value
        whole = _GLOBAL.fullmatch(value)
        if whole:
            return self._global(whole.group(1))
        return _GLOBAL.sub(lambda m: self._global_text(m.group(1)), value)

    def _global(self, dotted: str) -> Any:
        node: Any = self._globals
        for part in dotted.split("."):
            if part.startswith("_") or not isinstance(node, dict) or part not in node:
                raise _Fallback(f"globals key {dotted!r}: Kedro names it")
            node = node[part]
        if isinstance(node, dict | list) or (isinstance(node, str) and "${" in node):
            raise _Fallback(f"globals key {dotted!r} is not a plain value")
        return node

    def _global_text(self, dotted: str) -> str:
        value = self._global(dotted)
        if value is None or isinstance(value, bool | float):
            raise _Fallback("a None, bool or float global inside a string")
        return str(value)


def is_cpu_dry_run(loader: Any) -> bool:
    """Whether ``loader``'s environment is a CPU dry run (``cpu_dry_run: true`` in its globals,
    as ``conf/paper_check``); False when its globals cannot be read (Kedro reports that itself)."""
    try:
        return bool(loader["globals"].get("cpu_dry_run", False))
    except Exception:
        return False
