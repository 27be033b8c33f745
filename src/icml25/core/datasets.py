"""Kedro datasets the project adds to kedro-datasets' set."""

from __future__ import annotations

import json
import zipfile
from collections import OrderedDict
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


class AtomicTextDataset(AbstractDataset[str, str]):
    """A local text file replaced in one step: written beside the target, then renamed over it.

    A reader (or a failed save) never sees half a file, and the previous file stays whole
    until the new one is complete; the scorecard is saved this way so that a report that
    fails keeps the last good one.
    """

    def __init__(self, filepath: str, metadata: dict[str, Any] | None = None) -> None:
        self._filepath = Path(filepath)
        self.metadata = metadata

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath)}

    def _exists(self) -> bool:
        return self._filepath.exists()

    def load(self) -> str:
        return self._filepath.read_text(encoding="utf-8")

    def save(self, data: str) -> None:
        _replace_atomically(self._filepath, data)


class AtomicJSONDataset(AtomicTextDataset):
    """A JSON document saved like :class:`AtomicTextDataset` (``indent`` as in ``json.dumps``)."""

    def __init__(self, filepath: str, indent: int | None = 2,
                 metadata: dict[str, Any] | None = None) -> None:
        super().__init__(filepath, metadata)
        self._indent = indent

    def load(self) -> Any:
        return json.loads(self._filepath.read_text(encoding="utf-8"))

    def save(self, data: Any) -> None:
        _replace_atomically(self._filepath, json.dumps(data, indent=self._indent) + "\n")


def _replace_atomically(path: Path, text: str) -> None:
    import os
    import tempfile

    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class CredentialsDataset(AbstractDataset[Any, dict[str, Any]]):
    """One entry of Kedro's credentials, handed to the node that needs it.

    The catalog entry names it (``credentials: vga_mllm``); Kedro resolves the name from
    ``conf/<env>/credentials.yml`` (see :mod:`icml25.core.credentials`) and loading returns a
    copy of the entry, ``{}`` when it is empty. Its description, which Kedro logs, names the
    entry's keys but never their values; it cannot be saved.
    """

    def __init__(self, credentials: dict[str, Any] | None = None,
                 metadata: dict[str, Any] | None = None) -> None:
        self._credentials = dict(credentials or {})
        self.metadata = metadata

    def _describe(self) -> dict[str, Any]:
        return {"keys": sorted(self._credentials)}

    def load(self) -> dict[str, Any]:
        return dict(self._credentials)

    def save(self, data: Any) -> None:
        raise TypeError("CredentialsDataset is read-only: credentials live in "
                        "conf/<env>/credentials.yml")


# ------------------------------------------------------------------ no-pickle array trees

class ArrayTreeDataset(AbstractDataset[Any, Any]):
    """Nested Python data with numpy arrays in one numpy ``.npz`` file, never a pickle.

    Stores any tree of dicts and OrderedDicts (keys: str, int, float, bool, None or tuples of
    them), lists, tuples, None, bool, int, float, str, numpy arrays and scalars, torch tensors,
    pandas DataFrames and the dataclasses named in ``dataclasses``. Arrays (and tensors) are ``.npz``
    entries; a DataFrame is a Parquet file held as a byte array; the tree's shape is a JSON
    document stored beside them. Loading uses ``numpy.load(allow_pickle=False)`` and rebuilds
    only the types above, so a file received from a DVC remote cannot run code when it is
    read, as a pickle could.

    ``dataclasses`` lists, by import path, the dataclass types a node may save (for instance
    ``icml25.pipelines.softshape.ucr_data.LabelledSeries``); a file naming any other class is
    refused on load. Their fields are restored without calling ``__init__``, as unpickling
    does.
    """

    _TREE = "__tree__"

    def __init__(self, filepath: str, dataclasses: list[str] | None = None,
                 compress: bool = False, metadata: dict[str, Any] | None = None) -> None:
        self._filepath = Path(filepath)
        self._dataclasses = list(dataclasses or [])
        self._compress = compress
        self.metadata = metadata

    def _describe(self) -> dict[str, Any]:
        return {"filepath": str(self._filepath), "dataclasses": self._dataclasses}

    def _exists(self) -> bool:
        return self._filepath.exists()

    def save(self, data: Any) -> None:
        import numpy as np

        arrays: dict[str, Any] = {}
        tree = _encode(data, arrays, set(self._dataclasses), "data")
        arrays[self._TREE] = np.frombuffer(json.dumps(tree).encode(), dtype=np.uint8)
        self._filepath.parent.mkdir(parents=True, exist_ok=True)
        # numpy appends .npz to a name without it; write beside the target, then rename
        tmp = self._filepath.with_name(self._filepath.name + ".tmp.npz")
        (np.savez_compressed if self._compress else np.savez)(tmp, **arrays)
        tmp.replace(self._filepath)

    def load(self) -> Any:
        import numpy as np

        if not self._filepath.exists():
            raise FileNotFoundError(f"{self._filepath} does not exist")
        try:
            if not zipfile.is_zipfile(self._filepath):
                raise ValueError("not an .npz (zip) archive")
            with np.load(self._filepath, allow_pickle=False) as archive:
                arrays = {k: archive[k] for k in archive.files}
        except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
            raise ValueError(f"{self._filepath} is not a readable .npz array tree: {err}") from err
        if self._TREE not in arrays:
            raise ValueError(f"{self._filepath} has no {self._TREE!r} entry: not written by "
                             "ArrayTreeDataset")
        tree = json.loads(arrays.pop(self._TREE).tobytes().decode())
        return _decode(tree, arrays, set(self._dataclasses), str(self._filepath))


_SCALARS = (type(None), bool, int, float, str)


def _encode(value: Any, arrays: dict[str, Any], allowed: set[str], where: str) -> Any:
    """The JSON form of ``value``; arrays go into ``arrays``. Every non-list JSON object is a
    one-tag ``{"$kind": ...}`` record, so a tag can never be mistaken for user data."""
    import dataclasses

    import numpy as np

    if type(value) in _SCALARS:
        return value
    if isinstance(value, np.generic):  # numpy scalar: keep its dtype
        if value.dtype.hasobject:
            raise TypeError(f"ArrayTreeDataset: {where} is a numpy object scalar")
        return {"$scalar": value.dtype.str, "value": value.item()}
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject:
            raise TypeError(f"ArrayTreeDataset: {where} is an object array (numpy would pickle "
                            "it); store its items as a list")
        return {"$array": _put(arrays, value)}
    if isinstance(value, list):
        return [_encode(v, arrays, allowed, f"{where}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return {"$tuple": [_encode(v, arrays, allowed, f"{where}[{i}]")
                           for i, v in enumerate(value)]}
    if type(value) in (dict, OrderedDict):  # an OrderedDict: a torch state dict
        if all(type(k) is str for k in value):
            node = {"$dict": {k: _encode(v, arrays, allowed, f"{where}[{k!r}]")
                              for k, v in value.items()}}
        else:
            node = {"$items": [[_encode_key(k, where),
                                _encode(v, arrays, allowed, f"{where}[{k!r}]")]
                               for k, v in value.items()]}
        return {**node, "ordered": True} if type(value) is OrderedDict else node
    module = type(value).__module__
    if module.startswith("pandas") and type(value).__name__ == "DataFrame":
        return {"$frame": _put(arrays, _frame_bytes(value, where))}
    if module.startswith("torch") and type(value).__name__ == "Tensor":
        import torch

        tensor = value.detach().cpu()
        dtype = str(tensor.dtype).removeprefix("torch.")
        if tensor.dtype == torch.bfloat16:  # numpy has no bfloat16: keep the bits
            tensor = tensor.view(torch.int16)
        return {"$tensor": _put(arrays, tensor.numpy()), "dtype": dtype}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        name = f"{type(value).__module__}.{type(value).__qualname__}"
        if name not in allowed:
            raise TypeError(f"ArrayTreeDataset: {where} is a {name}; list it under the "
                            "dataset's `dataclasses:` in the catalog, or store a plain dict")
        return {"$dataclass": name,
                "fields": {f.name: _encode(getattr(value, f.name), arrays, allowed,
                                           f"{where}.{f.name}")
                           for f in dataclasses.fields(value)}}
    raise TypeError(f"ArrayTreeDataset cannot store {where}, a "
                    f"{type(value).__module__}.{type(value).__qualname__}: convert it to dicts, "
                    "lists, numbers, strings, arrays or DataFrames")


def _encode_key(key: Any, where: str) -> Any:
    if type(key) in _SCALARS:
        return key
    if type(key) is tuple:
        return {"$tuple": [_encode_key(k, where) for k in key]}
    raise TypeError(f"ArrayTreeDataset: a key of {where} is a {type(key).__name__}; keys must be "
                    "str, int, float, bool, None or tuples of them")


def _put(arrays: dict[str, Any], array: Any) -> str:
    key = f"a{len(arrays)}"
    arrays[key] = array
    return key


def _frame_bytes(frame: Any, where: str) -> Any:
    import io

    import numpy as np

    buffer = io.BytesIO()
    try:
        frame.to_parquet(buffer)
    except (ValueError, TypeError) as err:  # pyarrow's ArrowInvalid is a ValueError
        raise TypeError(f"ArrayTreeDataset: the DataFrame at {where} cannot be written as "
                        f"Parquet: {err}") from err
    return np.frombuffer(buffer.getvalue(), dtype=np.uint8)


def _decode(node: Any, arrays: dict[str, Any], allowed: set[str], source: str) -> Any:
    import numpy as np

    if node is None or isinstance(node, bool | int | float | str):
        return node
    if isinstance(node, list):
        return [_decode(v, arrays, allowed, source) for v in node]
    if "$array" in node:
        return arrays[node["$array"]]
    if "$dict" in node or "$items" in node:
        mapping = OrderedDict() if node.get("ordered") else {}
        if "$dict" in node:
            mapping.update((k, _decode(v, arrays, allowed, source))
                           for k, v in node["$dict"].items())
        else:
            mapping.update((_decode(k, arrays, allowed, source), _decode(v, arrays, allowed, source))
                           for k, v in node["$items"])
        return mapping
    if "$tuple" in node:
        return tuple(_decode(v, arrays, allowed, source) for v in node["$tuple"])
    if "$scalar" in node:
        return np.dtype(node["$scalar"]).type(node["value"])
    if "$frame" in node:
        import io

        import pandas as pd

        return pd.read_parquet(io.BytesIO(arrays[node["$frame"]].tobytes()))
    if "$tensor" in node:
        import torch

        tensor = torch.from_numpy(np.array(arrays[node["$tensor"]]))
        if node["dtype"] == "bfloat16":
            tensor = tensor.view(torch.bfloat16)
        return tensor
    if "$dataclass" in node:
        return _rebuild_dataclass(node, arrays, allowed, source)
    raise ValueError(f"{source}: unknown array-tree record {sorted(node)}")


def _rebuild_dataclass(node: dict[str, Any], arrays: dict[str, Any], allowed: set[str],
                       source: str) -> Any:
    import dataclasses
    import importlib

    name = node["$dataclass"]
    if name not in allowed:
        raise ValueError(f"{source} holds a {name}, which the catalog entry does not list under "
                         "`dataclasses:`; refusing to build it")
    module, _, qualname = name.rpartition(".")
    cls: Any = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise ValueError(f"{source}: {name} is not a dataclass")
    obj = cls.__new__(cls)
    for field_name, value in node["fields"].items():
        object.__setattr__(obj, field_name, _decode(value, arrays, allowed, source))
    return obj
