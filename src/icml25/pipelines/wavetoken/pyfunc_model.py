"""The registered WaveToken model's definition for MLflow "models from code".

``mlflow.pyfunc.log_model(python_model=<this file>)`` stores this source file with the model
instead of a cloudpickle of a ``WaveTokenPyfunc`` instance, and ``mlflow.pyfunc.load_model``
runs it to get the model object: loading the model executes this file (and the installed
``icml25`` it imports), never unpickled bytes. The weights are the model's ``model`` artifact,
a safetensors file (:class:`icml25.core.datasets.TorchModelDataset`).
"""

import mlflow

from icml25.pipelines.wavetoken.serving import WaveTokenPyfunc

mlflow.models.set_model(WaveTokenPyfunc())
