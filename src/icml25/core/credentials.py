"""Credentials: one mechanism, Kedro's.

Every secret the project reads is an entry of Kedro's credentials, ``conf/local/credentials.yml``
(git-ignored; for ``--env=paper`` or ``--env=test``, ``conf/<env>/credentials.yml``, as Kedro reads
``conf/base`` and the run environment only). ``conf/base/credentials.yml`` is the committed
template: it names every entry the project reads, with comments, and holds no value. A catalog
dataset hands an entry to the node that needs it (``credentials: <entry>`` on an
:class:`icml25.core.datasets.CredentialsDataset`), so no code reads environment variables or
credentials files itself; a value may still come from the environment through Kedro's resolver,
``api_key: ${oc.env:OPENAI_API_KEY}``.

:class:`CredentialsCheckHook` reads the environment's credentials files before the catalog is
built and refuses a malformed one (not YAML, not a mapping, an entry of the wrong shape or with
an unknown key) with one line naming the file.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml
from kedro.framework.hooks import hook_impl

from icml25.preflight import PreflightError

#: The entries the project's catalogs read, with the keys each may have. ``base_url`` and
#: ``model`` may instead come from the room's parameters; ``api_key`` only from here.
ENDPOINT_ENTRIES: dict[str, str] = {
    "functional_tom_llm": "functional_tom.llm_endpoint (functional_tom.llm.backend: openai)",
    "malot_endpoint": "malot.endpoint (malot.agent.backend: openai)",
    "vga_mllm": "vga.mllm_endpoint (vga.mllm.enabled: true)",
}
ENDPOINT_KEYS = ("base_url", "model", "api_key")
TEMPLATE = "conf/base/credentials.yml"
#: Kedro's own patterns for the credentials of an environment folder
PATTERNS = ("credentials*", "credentials*/**", "**/credentials*")
EXTENSIONS = (".yml", ".yaml", ".json")


class CredentialsError(PreflightError):
    """A credentials file cannot be used; the message names the file (printed as one line by
    ``kedro run``, like the other start-of-run checks)."""


def credentials_files(conf_source: Path, envs: Iterable[str],
                      patterns: Iterable[str] = PATTERNS) -> list[Path]:
    """The files Kedro reads as credentials in ``conf_source/<env>`` for each of ``envs``."""
    found: set[Path] = set()
    for env in envs:
        folder = conf_source / env
        if not folder.is_dir():
            continue
        for pattern in patterns:
            for path in folder.glob(pattern):
                hidden = any(part.startswith(".") for part in path.relative_to(folder).parts)
                if path.is_file() and path.suffix in EXTENSIONS and not hidden:
                    found.add(path)
    return sorted(found)


def check_credentials_file(path: Path, shown: str | None = None) -> dict[str, Any]:
    """The entries of one credentials file; :class:`CredentialsError` naming it if it is not
    YAML, not a mapping of entry names, or if one of the project's entries is not a mapping of
    ``base_url``/``model``/``api_key`` strings."""
    name = shown or str(path)
    hint = f"see {TEMPLATE} for the entries the project reads"
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = getattr(err, "problem", None) or "unreadable"
        raise CredentialsError(f"{name}: not valid YAML{where} ({problem}); {hint}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise CredentialsError(f"{name}: cannot be read ({err}); {hint}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise CredentialsError(f"{name}: must map entry names to entries, got a "
                               f"{type(data).__name__}; {hint}")
    for entry, value in data.items():
        if entry not in ENDPOINT_ENTRIES or value is None:
            continue
        if not isinstance(value, Mapping):
            raise CredentialsError(f"{name}: {entry} must be a mapping of "
                                   f"{', '.join(ENDPOINT_KEYS)}, got a {type(value).__name__}")
        unknown = sorted(set(map(str, value)) - set(ENDPOINT_KEYS))
        if unknown:
            raise CredentialsError(f"{name}: {entry} has unknown key(s) {', '.join(unknown)} "
                                   f"(expected {', '.join(ENDPOINT_KEYS)}); {hint}")
        bad = sorted(k for k, v in value.items() if v is not None and not isinstance(v, str))
        if bad:
            raise CredentialsError(f"{name}: {entry}.{bad[0]} must be a string")
    return dict(data)


def check_credentials(conf_source: Path, envs: Iterable[str], project_path: Path | None = None,
                      patterns: Iterable[str] = PATTERNS) -> None:
    """Check every credentials file of ``envs`` (:func:`check_credentials_file`)."""
    for path in credentials_files(conf_source, envs, patterns):
        shown = str(path)
        if project_path is not None:
            with contextlib.suppress(ValueError):  # a conf folder outside the project
                shown = path.resolve().relative_to(project_path.resolve()).as_posix()
        check_credentials_file(path, shown)


class CredentialsCheckHook:
    """Checks the run environment's credentials files when the context is created, before
    Kedro builds the catalog (which would fail on them later, with a long traceback)."""

    @hook_impl(tryfirst=True)
    def after_context_created(self, context: Any) -> None:
        loader = context.config_loader
        conf_source = getattr(loader, "conf_source", None)
        if conf_source is None or not Path(conf_source).is_dir():
            return  # a packaged configuration: Kedro's own errors apply
        base = getattr(loader, "base_env", None) or "base"
        env = context.env or getattr(loader, "default_run_env", None) or "local"
        patterns = getattr(loader, "config_patterns", {}).get("credentials", PATTERNS)
        check_credentials(Path(conf_source), dict.fromkeys([base, env]),
                          Path(context.project_path), patterns)


CREDENTIALS_HOOKS = (CredentialsCheckHook(),)
