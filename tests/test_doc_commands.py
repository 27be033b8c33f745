"""Every command shown in README.md and docs/ parses and names things that exist.

Commands are the lines of fenced ``bash``/``sh``/``console``/``shell`` blocks (and unlabelled
ones), with ``$ `` prompts, trailing comments and leading ``VAR=value`` assignments removed and
``\\``-continued lines joined. ``kedro run`` lines go through Kedro's own click parser (so a
``--params`` value Kedro would reject fails here too), then their pipeline, environment,
parameter keys, runner and node names are looked up in the project; ``make`` targets in the
Makefile; ``dvc repro``/``dvc status`` stages in ``dvc stage list``; ``python -m`` modules must be
importable.
"""

from __future__ import annotations

import importlib.util
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import click
import pytest

PROJECT = Path(__file__).resolve().parents[1]
SHELL_FENCES = {"", "bash", "sh", "console", "shell"}
KEDRO_SUBCOMMANDS = {"run", "viz", "registry", "catalog", "ipython", "jupyter", "mlflow", "info",
                     "pipeline"}
_FENCE = re.compile(r"^(?P<indent>\s*)(?P<ticks>```+|~~~+)\s*(?P<lang>[\w+-]*)")


def doc_files() -> list[Path]:
    return [PROJECT / "README.md", *sorted((PROJECT / "docs").rglob("*.md"))]


def shell_commands(text: str) -> Iterator[tuple[int, str]]:
    """``(line number, command)`` of every command line in the shell code blocks of ``text``.

    Unlabelled blocks also hold directory trees and sketches: from those, only lines whose
    first word is one of the project's tools count as commands."""
    fence: str | None = None
    lang = ""
    pending, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        match = _FENCE.match(line)
        if fence is None:
            if match:
                fence, lang = match["ticks"], match["lang"].lower()
            continue
        if match and match["ticks"].startswith(fence) and not match["lang"]:
            fence = None
            continue
        if lang not in SHELL_FENCES:
            continue
        stripped = line.strip()
        if stripped.startswith("$ "):
            stripped = stripped[2:]
        if not pending:
            start = number
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        command, pending = (pending + stripped).strip(), ""
        if not command or command.startswith("#"):
            continue
        if lang or re.match(r"(?:[A-Za-z_]\w*=\S*\s+)*(?:kedro|make|dvc|mlflow|torchrun|python3?)\s",
                            command + " "):
            yield start, command


def split_command(command: str) -> list[str]:
    """Words of one command, without comments and leading ``VAR=value`` assignments."""
    words = shlex.split(command, comments=True)
    while words and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", words[0]):
        words.pop(0)
    return words


def all_commands() -> list[tuple[str, list[str]]]:
    out = []
    for path in doc_files():
        for number, command in shell_commands(path.read_text(encoding="utf-8")):
            for part in re.split(r"\s*(?:&&|;|\|\|)\s*", command):
                words = split_command(part)
                if words:
                    out.append((f"{path.relative_to(PROJECT)}:{number}", words))
    return out


@cache
def pipelines() -> dict[str, Any]:
    from icml25.pipeline_registry import register_pipelines

    return register_pipelines()


@cache
def parameters(env: str) -> dict[str, Any]:
    from kedro.config import OmegaConfigLoader

    from icml25 import settings

    loader = OmegaConfigLoader(conf_source=str(PROJECT / "conf"), env=env,
                               **{**settings.CONFIG_LOADER_ARGS, "default_run_env": env})
    return dict(loader["parameters"])


@cache
def make_targets() -> set[str]:
    text = (PROJECT / "Makefile").read_text(encoding="utf-8")
    return set(re.findall(r"^([A-Za-z][\w-]*):", text, flags=re.M))


@cache
def dvc_stages() -> set[str]:
    done = subprocess.run([str(Path(sys.executable).parent / "dvc"), "stage", "list",
                           "--name-only"], cwd=PROJECT, capture_output=True, text=True,
                          timeout=120, check=True)
    return set(done.stdout.split())


def _leaf_keys(tree: Mapping[str, Any], prefix: str = "") -> Iterator[str]:
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            yield from _leaf_keys(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}"


def _has_key(tree: Mapping[str, Any], dotted: str) -> bool:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return False
        node = node[part]
    return True


def _model_has(model: Any, dotted: str) -> bool:
    """Whether ``dotted`` names a field of the pydantic model (nested models followed)."""
    import typing

    from pydantic import BaseModel

    for part in dotted.split("."):
        fields = getattr(model, "model_fields", None)
        if not fields or part not in fields:
            return False
        annotation = fields[part].annotation
        candidates = [annotation, *typing.get_args(annotation)]
        model = next((c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)),
                     None)
    return True


def parameter_exists(params: Mapping[str, Any], dotted: str) -> bool:
    """In the env's YAML, or a field (with its default) of the room's PARAMETERS model."""
    if _has_key(params, dotted):
        return True
    from icml25.pipeline_registry import _rooms

    namespace, _, rest = dotted.partition(".")
    room = _rooms().get(namespace)
    return bool(rest) and room is not None and _model_has(room.PARAMETERS, rest)


def check_kedro(words: list[str]) -> list[str]:
    """What is wrong with one ``kedro ...`` command (empty when nothing)."""
    if len(words) < 2 or words[1] not in KEDRO_SUBCOMMANDS:
        return [f"unknown kedro subcommand {words[1:2]}"]
    if words[1] != "run":
        return []
    from kedro.framework.cli.project import run

    try:
        ctx = run.make_context("run", words[2:])
    except click.ClickException as err:
        return [f"kedro would refuse it: {err.format_message()}"]
    opts = ctx.params
    env = opts.get("env") or "local"
    problems = []
    if env != "local" and not (PROJECT / "conf" / env).is_dir():
        problems.append(f"no config environment {env!r} (conf/{env}/)")
        return problems
    names = [opts["pipeline"]] if opts.get("pipeline") else list(opts.get("pipelines") or [])
    for name in names:
        if name not in pipelines():
            problems.append(f"no pipeline {name!r}")
    params = parameters(env)
    for key in _leaf_keys(opts.get("params") or {}):
        if not parameter_exists(params, key):
            problems.append(f"no parameter {key!r} in env {env!r}")
    if opts.get("runner"):
        module, _, cls = opts["runner"].rpartition(".")
        try:
            found = hasattr(importlib.import_module(module or "kedro.runner"), cls)
        except ImportError:
            found = False
        if not found:
            problems.append(f"no runner {opts['runner']!r}")
    for node in opts.get("node_names") or ():
        selected = [pipelines()[n] for n in names] or [pipelines()["__default__"]]
        if not any(node in {n.name for n in p.nodes} for p in selected):
            problems.append(f"no node {node!r} in {names or ['__default__']}")
    return problems


def check(words: list[str]) -> list[str]:
    tool = Path(words[0]).name
    if tool == "kedro":
        return check_kedro(words)
    if tool == "torchrun":
        if "-m" in words and words[words.index("-m") + 1:words.index("-m") + 2] == ["kedro"]:
            return check_kedro(words[words.index("-m") + 1:])
        return []
    if tool == "make":
        targets = [w for w in words[1:] if not w.startswith("-") and "=" not in w]
        problems = [f"no make target {t!r}" for t in targets if t not in make_targets()]
        for assignment in (w for w in words[1:] if w.startswith("PIPELINE=")):
            if assignment.split("=", 1)[1] not in pipelines():
                problems.append(f"no pipeline {assignment}")
        return problems
    if tool == "dvc" and len(words) > 2 and words[1] in ("repro", "status"):
        stages = [w for w in words[2:] if not w.startswith("-")]
        return [f"no dvc stage {s!r}" for s in stages if s not in dvc_stages()]
    if tool.startswith("python") and len(words) > 2 and words[1] == "-m":
        module = words[2]
        if importlib.util.find_spec(module.split(".")[0]) is None or (
                module.startswith("icml25") and importlib.util.find_spec(module) is None):
            return [f"no module {module!r}"]
    return []


def test_the_extractor_reads_blocks_joins_lines_and_drops_prompts_and_comments():
    text = ("intro\n```bash\n$ kedro run --pipeline=a \\\n  --env=test   # fast\n# a comment\n"
            "```\n```python\nkedro run --pipeline=b\n```\n```\nOMP_NUM_THREADS=1 make test\n"
            "src/  the code's folder, don't\n```\n")
    found = [(n, split_command(c)) for n, c in shell_commands(text)]
    assert found == [(3, ["kedro", "run", "--pipeline=a", "--env=test"]),
                     (11, ["make", "test"])]


def test_the_checker_catches_what_users_mistype():
    assert check(["kedro", "run", "--pipeline=wavetoken"]) == []
    assert check(["kedro", "run", "--pipeline=wavetokn"]) == ["no pipeline 'wavetokn'"]
    assert check(["kedro", "run", "--pipeline=wavetoken", "--env=tset"]) == [
        "no config environment 'tset' (conf/tset/)"]
    assert check(["kedro", "run", "--params=wavetoken.nope=1"]) == [
        "no parameter 'wavetoken.nope' in env 'local'"]
    bad_list = check(["kedro", "run", "--params=wavetoken.seeds=[0,1,2]"])
    assert len(bad_list) == 1 and "kedro would refuse it" in bad_list[0]
    assert check(["make", "tset"]) == ["no make target 'tset'"]
    assert check(["kedro", "run", "--runner=icml25.runners.NoSuchRunner"]) == [
        "no runner 'icml25.runners.NoSuchRunner'"]


@pytest.mark.parametrize("where,words", all_commands(), ids=lambda v: v if isinstance(v, str)
                         else None)
def test_every_documented_command_parses_and_names_what_exists(where, words):
    assert check(words) == [], f"{where}: {shlex.join(words)}"
