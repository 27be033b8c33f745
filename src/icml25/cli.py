"""Project commands of icml25: ``kedro run`` is Kedro's own, except that a refused run prints one
message, not a traceback.

Kedro loads this module for every ``kedro`` command inside the project and lets its ``cli`` group
override the built-in commands; ``python -m icml25`` runs its ``run``. The command takes exactly
Kedro's options. What it adds:

- a start-of-run check that fails (:class:`icml25.preflight.PreflightError`: an unknown
  ``--env`` or ``--params`` namespace, an output folder that cannot be written) or a parameter
  that fails its pydantic model (:class:`icml25.core.params.ParameterError`) ends the command
  with ``Error: <message>`` and exit status 1;
- any other exception keeps Kedro's traceback: it is a bug to look at, not a typo.

Logging: ``conf/logging.yml`` (Kedro reads it from the project root) shows node progress,
warnings and errors. Every dataset load and save is shown with
``KEDRO_LOGGING_CONFIG=conf/logging_verbose.yml kedro run ...``.

The ``run`` command is built on first use (Kedro's ``LazyGroup``), so ``kedro registry list``
and the other commands do not import the session machinery for it.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import click
from kedro.framework.cli.utils import CONTEXT_SETTINGS, LazyGroup

__all__ = ["cli", "refused_run_errors"]  # and `run`, built on first access (below)


@click.group(name="kedro", cls=LazyGroup, context_settings=CONTEXT_SETTINGS,
             lazy_subcommands={"run": "icml25.cli.run"})
def cli() -> None:
    """icml25 project commands (kedro run: a refused run prints one line)."""


def refused_run_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that mean "this run was refused", printed as a message only."""
    from kedro.validation.exceptions import ParameterValidationError

    from icml25.core.params import ParameterError
    from icml25.preflight import PreflightError

    return (PreflightError, ParameterError, ParameterValidationError)


@cache
def _run_command() -> click.Command:
    from kedro.framework.cli.project import run as kedro_run

    def run(**kwargs: Any) -> Any:
        try:
            return kedro_run.callback(**kwargs)
        except refused_run_errors() as err:
            raise click.ClickException(str(err)) from None

    return click.Command(
        name="run", callback=run, params=list(kedro_run.params), help=kedro_run.help,
        short_help=kedro_run.short_help, context_settings=kedro_run.context_settings,
    )


def __getattr__(name: str) -> Any:
    # `run` is built on first access: by the LazyGroup above, or by `python -m icml25`
    if name == "run":
        return _run_command()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
