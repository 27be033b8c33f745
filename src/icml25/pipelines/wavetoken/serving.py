"""The trained WaveToken model as an MLflow pyfunc: registered, with a signature and an example.

``mlflow.pyfunc.load_model("models:/wavetoken@newest").predict(frame)`` forecasts from a table
of contexts (one row per series, columns ``t0 .. t{C-1}`` oldest to newest, NaN = no history) and
returns the per-step median and the 10 % / 90 % quantiles of ``n_samples`` sampled paths.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow
import numpy as np
import pandas as pd

from icml25.core.datasets import TorchModelDataset
from icml25.core.tracking import register_logged_model


class WaveTokenPyfunc(mlflow.pyfunc.PythonModel):
    """Wraps a trained model file (safetensors + metadata) and its tokenizer for serving."""

    def load_context(self, context: Any) -> None:
        from icml25.pipelines.wavetoken.hf_t5 import load_model
        from icml25.pipelines.wavetoken.params import TokenizerParams
        from icml25.pipelines.wavetoken.pretraining import build_tokenizer

        entry = TorchModelDataset(filepath=context.artifacts["model"]).load()
        meta = entry["metadata"]
        self.meta = meta
        self.model = load_model(meta["model_config"], entry["state_dict"],
                                meta.get("backend", "torch")).eval()
        self.tokenizer = build_tokenizer(TokenizerParams(**meta["tokenizer"]),
                                         meta["context_length"])

    def predict(self, context: Any, model_input: pd.DataFrame, params: dict | None = None):
        from icml25.pipelines.wavetoken.forecaster import forecast

        params = params or {}
        horizon = int(params.get("horizon", self.meta["prediction_length"]))
        samples = forecast(self.model, self.tokenizer, model_input.to_numpy(dtype=np.float64),
                           horizon=horizon, prediction_length=self.meta["prediction_length"],
                           n_samples=int(params.get("n_samples", 20)),
                           seed=int(params.get("seed", 0)))
        q10, q50, q90 = np.quantile(samples, [0.1, 0.5, 0.9], axis=1)
        columns = {}
        for name, values in (("median", q50), ("q10", q10), ("q90", q90)):
            for h in range(horizon):
                columns[f"{name}_h{h}"] = values[:, h]
        return pd.DataFrame(columns)


def log_registered_model(model_file: Path, example: np.ndarray, name: str) -> str:
    """Log ``model_file`` as a pyfunc in the active run and return its URI; register it as
    ``name`` when the run's config env registers models (:func:`register_logged_model`)."""
    frame = pd.DataFrame(example, columns=[f"t{i}" for i in range(example.shape[1])])
    wrapper = WaveTokenPyfunc()
    # the example's output is computed by the model itself (signature inferred from real output)
    ctx = type("Context", (), {"artifacts": {"model": str(model_file)}})()
    wrapper.load_context(ctx)
    output = wrapper.predict(ctx, frame, {"n_samples": 4})
    signature = mlflow.models.infer_signature(
        frame, output, params={"horizon": int(wrapper.meta["prediction_length"]),
                               "n_samples": 20, "seed": 0})
    # logged from code (pyfunc_model.py), not as a cloudpickle of ``wrapper``
    info = mlflow.pyfunc.log_model(
        name="model", python_model=str(Path(__file__).with_name("pyfunc_model.py")),
        artifacts={"model": str(model_file)},
        signature=signature, input_example=frame,
        pip_requirements=["icml25", "torch", "pywavelets", "numpy", "pandas", "safetensors"],
    )
    register_logged_model(info.model_uri, name)
    return info.model_uri
