"""icml25: ICML 2025 papers as runnable, tracked and comparable Kedro pipelines."""

import os as _os

__version__ = "0.1.0"

#: Usage telemetry of the libraries the project runs, off before any of them is imported (Kedro
#: imports this package before kedro-mlflow, MLflow, transformers or kedro-viz): MLflow 3 would
#: resolve and call its telemetry server on every import, kedro-telemetry (also off through
#: ``.telemetry``) and kedro-viz send usage events, huggingface_hub its ``send_telemetry`` calls.
#: A value the user has set is kept. DVC's analytics are off in ``.dvc/config``.
TELEMETRY_OFF = {
    "MLFLOW_DISABLE_TELEMETRY": "true",
    "KEDRO_DISABLE_TELEMETRY": "true",
    "HF_HUB_DISABLE_TELEMETRY": "1",
}
for _name, _value in TELEMETRY_OFF.items():
    _os.environ.setdefault(_name, _value)
