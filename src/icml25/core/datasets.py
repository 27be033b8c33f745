"""Kedro datasets the project adds to kedro-datasets' set."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kedro.io import AbstractDataset
from kedro_datasets.json import JSONDataset
from kedro_datasets.partitions import PartitionedDataset


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


class OptionalPartitionedDataset(PartitionedDataset):
    """A partitioned folder that may hold no partition: loading it then gives ``{}``.

    A seed shard with no seed to train (see :mod:`icml25.core.sweep`) saves ``{}``; with
    ``overwrite: true`` that clears the folder, and the next node loads an empty dict instead of
    kedro-datasets' "No partitions found" error.
    """

    def load(self) -> dict[str, Any]:
        if not self._list_partitions():
            return {}
        return super().load()


class TorchModelDataset(AbstractDataset[dict[str, Any], dict[str, Any]]):
    """A torch model as a state dict in a ``.safetensors`` file, never a pickled module.

    Saves and loads ``{"state_dict": {name: tensor}, "metadata": {...}}``; the metadata (model
    config, tokenizer settings, training history: anything JSON-serialisable) is stored as JSON
    inside the safetensors header, so the file alone rebuilds the model.
    """

    _METADATA_KEY = "icml25"

    def __init__(self, filepath: str, metadata: dict[str, Any] | None = None) -> None:
        self._filepath = Path(filepath)
        self.metadata = metadata  # Kedro's dataset metadata (e.g. kedro-viz layer)

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}

    def _exists(self) -> bool:
        return self._filepath.exists()

    def load(self) -> dict[str, Any]:
        from safetensors import SafetensorError
        from safetensors.torch import load_file, safe_open

        if not self._filepath.exists():
            raise FileNotFoundError(f"model file {self._filepath} does not exist; run training")
        try:
            with safe_open(str(self._filepath), framework="pt") as handle:
                header = handle.metadata() or {}
            state_dict = load_file(str(self._filepath))
        except (SafetensorError, OSError, ValueError) as err:
            raise ValueError(f"model file {self._filepath} is not a readable safetensors file: "
                             f"{err}") from err
        return {"state_dict": state_dict,
                "metadata": json.loads(header.get(self._METADATA_KEY, "{}"))}

    def save(self, data: dict[str, Any]) -> None:
        from safetensors.torch import save_file

        if not isinstance(data, dict) or "state_dict" not in data:
            raise TypeError("TorchModelDataset saves {'state_dict': ..., 'metadata': ...}")
        # clone: tied weights share storage, which safetensors refuses to write as such
        tensors = {k: v.detach().cpu().contiguous().clone() for k, v in data["state_dict"].items()}
        header = {self._METADATA_KEY: json.dumps(data.get("metadata", {}))}
        self._filepath.parent.mkdir(parents=True, exist_ok=True)
        tmp = self._filepath.with_suffix(self._filepath.suffix + ".tmp")
        save_file(tensors, str(tmp), metadata=header)
        tmp.replace(self._filepath)
