"""Kedro datasets the project adds to kedro-datasets' set."""

from __future__ import annotations

from typing import Any

from kedro_datasets.json import JSONDataset


class OptionalJSONDataset(JSONDataset):
    """A JSON file that may not exist yet: loading a missing file returns ``None``.

    The report pipeline reads every paper's ``claims.json`` through this type, so a paper that has
    not been run shows as "not run" instead of failing the report. A file that exists but is not
    valid JSON still raises, naming the file.
    """

    def load(self) -> Any:
        if not self._exists():
            return None
        return super().load()
