"""Local Chronos checkpoints as a zero-shot baseline of the wavetoken pipeline.

A Chronos-T5 checkpoint (Ansari et al., "Chronos", TMLR 2024) is a folder in Hugging Face format:
``config.json`` -- a ``T5Config`` plus a ``chronos_config`` dict (``tokenizer_class``
``MeanScaleUniformBins``, ``tokenizer_kwargs`` ``{low_limit, high_limit}``, ``n_tokens``,
``n_special_tokens``, ``pad_token_id``, ``eos_token_id``, ``use_eos_token``, ``model_type``
``seq2seq``, ``context_length``, ``prediction_length``, ``num_samples``, ``temperature``,
``top_k``, ``top_p``) -- and the weights (``model.safetensors``). A user who downloaded one
elsewhere points the pipeline at the folder; this module never downloads anything
(``local_files_only=True``; a path that is not a folder is an error, never a Hub id).

:func:`load_chronos_checkpoint` returns the T5 wrapped with the ``generate`` interface of
:func:`icml25.pipelines.wavetoken.forecaster.forecast`, the project's
:class:`~icml25.pipelines.wavetoken.bin_tokenizer.MeanScaleUniformBins` (Chronos' tokenizer,
``scaling="mean"``, id for id equal to chronos-forecasting's) and the parsed ``chronos_config``;
:func:`forecast_checkpoint` is the one call the pipeline makes.

Equality with ``chronos.ChronosPipeline.predict`` (tested with greedy decoding on a tiny random
T5): generation uses Chronos' settings (``do_sample=True``, ``min_new_tokens = max_new_tokens``,
its PAD/EOS ids, no suppressed tokens -- unlike the project's own ``hf_t5`` backend, which never
lets a model trained here emit PAD or EOS); long horizons roll out in blocks of the checkpoint's
``prediction_length`` with the per-step (lower) median fed back; contexts are brought to the
checkpoint's ``context_length`` (the last points kept, shorter ones left-padded with NaN, i.e.
masked PAD tokens, which T5's relative attention ignores) so that the forecaster's fixed-width
rollout drops exactly the points Chronos' truncation drops. Chronos returns float32; these
forecasts are float64 products of the same float32 centres and scales.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from icml25.pipelines.wavetoken.bin_tokenizer import MeanScaleUniformBins
from icml25.pipelines.wavetoken.tokenizer import EOS_ID, N_SPECIAL_TOKENS, PAD_ID

SUPPORTED_TOKENIZERS = ("MeanScaleUniformBins",)
WEIGHT_FILES = ("model.safetensors", "pytorch_model.bin", "model.safetensors.index.json",
                "pytorch_model.bin.index.json")


@dataclass(frozen=True)
class ChronosCheckpointConfig:
    """The ``chronos_config`` of a checkpoint's ``config.json`` (Chronos' ``ChronosConfig``)."""

    tokenizer_class: str
    tokenizer_kwargs: dict[str, Any]
    context_length: int
    prediction_length: int
    n_tokens: int
    n_special_tokens: int
    pad_token_id: int
    eos_token_id: int
    use_eos_token: bool
    model_type: str
    num_samples: int
    temperature: float
    top_k: int
    top_p: float

    @property
    def limits(self) -> tuple[float, float]:
        """``(low_limit, high_limit)`` of the uniform bins."""
        return float(self.tokenizer_kwargs["low_limit"]), float(self.tokenizer_kwargs["high_limit"])


def _fail(path: Path, message: str) -> ValueError:
    return ValueError(f"Chronos checkpoint {str(path)!r}: {message}")


def read_chronos_config(path: str | os.PathLike) -> ChronosCheckpointConfig:
    """Parse and check the ``chronos_config`` of the checkpoint folder ``path``.

    Raises ``FileNotFoundError`` (no folder, no ``config.json``) or ``ValueError`` naming the
    path (unreadable JSON, no ``chronos_config``, missing or mistyped fields, a tokenizer other
    than ``MeanScaleUniformBins``, a ``causal`` model, a non-T5 model, special ids other than
    PAD = 0 / EOS = 1 of 2, ``use_eos_token`` false).
    """
    folder = Path(path)
    if not folder.is_dir():
        raise FileNotFoundError(
            f"Chronos checkpoint {str(folder)!r}: no such folder (give the local folder holding "
            "config.json and model.safetensors; nothing is downloaded)"
        )
    config_file = folder / "config.json"
    if not config_file.is_file():
        raise FileNotFoundError(f"Chronos checkpoint {str(folder)!r}: no config.json in the folder")
    try:
        config = json.loads(config_file.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise _fail(folder, f"config.json is not readable JSON ({err})") from err
    if not isinstance(config, dict) or not isinstance(config.get("chronos_config"), dict):
        raise _fail(folder, "config.json has no 'chronos_config' dict: not a Chronos checkpoint")
    raw = config["chronos_config"]
    names = [f.name for f in fields(ChronosCheckpointConfig)]
    missing = [n for n in names if n not in raw]
    if missing:
        raise _fail(folder, f"chronos_config lacks {missing}")
    chronos = ChronosCheckpointConfig(**{n: raw[n] for n in names})

    if chronos.model_type != "seq2seq":
        raise _fail(folder, f"chronos_config.model_type {chronos.model_type!r} is not supported "
                            "(only 'seq2seq' encoder-decoder T5 checkpoints; causal ones are not)")
    if config.get("model_type", "t5") != "t5":
        raise _fail(folder, f"config.json model_type {config.get('model_type')!r} is not 't5'")
    if chronos.tokenizer_class not in SUPPORTED_TOKENIZERS:
        raise _fail(folder, f"chronos_config.tokenizer_class {chronos.tokenizer_class!r} is not "
                            f"supported (expected one of {SUPPORTED_TOKENIZERS})")
    kwargs = chronos.tokenizer_kwargs
    if not isinstance(kwargs, dict) or set(kwargs) != {"low_limit", "high_limit"}:
        raise _fail(folder, "chronos_config.tokenizer_kwargs must be {'low_limit', 'high_limit'}, "
                            f"got {kwargs!r}")
    if (chronos.n_special_tokens, chronos.pad_token_id, chronos.eos_token_id) != (
        N_SPECIAL_TOKENS, PAD_ID, EOS_ID
    ):
        raise _fail(folder, "only n_special_tokens=2, pad_token_id=0, eos_token_id=1 are "
                            f"supported, got {chronos.n_special_tokens}, {chronos.pad_token_id}, "
                            f"{chronos.eos_token_id}")
    if chronos.use_eos_token is not True:
        raise _fail(folder, "use_eos_token must be true (the project's tokenizer appends EOS)")
    for name in ("context_length", "prediction_length", "n_tokens", "num_samples"):
        value = getattr(chronos, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise _fail(folder, f"chronos_config.{name} must be a positive integer, got {value!r}")
    return chronos


class ChronosT5Model(nn.Module):
    """A checkpoint's ``T5ForConditionalGeneration`` with the forecaster's ``generate``.

    Sampling follows Chronos' ``ChronosModel.forward``: ``min_new_tokens = max_new_tokens =
    n_tokens``, ``do_sample=True``, ``num_return_sequences = n_samples``, the checkpoint's PAD
    and EOS ids, and nothing else suppressed.
    """

    def __init__(self, t5: nn.Module, chronos_config: ChronosCheckpointConfig) -> None:
        super().__init__()
        self.t5 = t5
        self.chronos_config = chronos_config

    @torch.no_grad()
    def generate(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, n_tokens: int,
                 n_samples: int = 20, temperature: float = 1.0, top_k: int | None = 50,
                 top_p: float = 1.0, generator: torch.Generator | None = None) -> torch.Tensor:
        """``[B, n_samples, n_tokens]`` sampled ids.

        HF ``generate`` draws from torch's global RNG: a seed drawn from ``generator`` seeds it
        inside ``fork_rng``, so the call is reproducible and leaves the global state untouched.
        ``top_k=None`` disables top-k filtering.
        """
        from transformers import GenerationConfig

        from icml25.pipelines.wavetoken.hf_t5 import seeded_generate

        cfg = self.chronos_config
        generation = GenerationConfig(
            min_new_tokens=int(n_tokens), max_new_tokens=int(n_tokens), do_sample=True,
            eos_token_id=cfg.eos_token_id,
            pad_token_id=cfg.pad_token_id, temperature=float(temperature),
            top_k=0 if top_k is None else int(top_k), top_p=float(top_p),
        )
        return seeded_generate(self.t5, input_ids, attention_mask, n_tokens, int(n_samples),
                               generator, self, generation_config=generation)


def load_chronos_checkpoint(
    path: str | os.PathLike, dtype: torch.dtype | None = torch.float32
) -> tuple[ChronosT5Model, MeanScaleUniformBins, ChronosCheckpointConfig]:
    """Load a local Chronos-T5 checkpoint folder -> ``(model, tokenizer, chronos_config)``.

    ``model`` has the ``generate`` interface of
    :func:`~icml25.pipelines.wavetoken.forecaster.forecast` (eval mode, on the CPU, cast to
    ``dtype``; ``None`` keeps the dtype transformers loads); ``tokenizer`` is
    ``MeanScaleUniformBins(n_tokens, (low_limit, high_limit), "mean", context_length)``.
    Loads with ``T5ForConditionalGeneration.from_pretrained(path, local_files_only=True)``.
    Errors name the path: see :func:`read_chronos_config`; a folder without weights raises
    ``FileNotFoundError``, weights that cannot be read or do not fit the config ``ValueError``.
    """
    folder = Path(path)
    chronos = read_chronos_config(folder)
    if not any((folder / name).is_file() for name in WEIGHT_FILES):
        raise FileNotFoundError(f"Chronos checkpoint {str(folder)!r}: no weights file (expected "
                                f"one of {list(WEIGHT_FILES)})")
    try:
        from transformers import T5ForConditionalGeneration
    except ImportError as err:  # pragma: no cover - depends on the environment
        raise ImportError("loading a Chronos checkpoint needs the transformers package "
                          "(pip install 'icml25[dev]' or pip install transformers)") from err
    try:
        t5 = T5ForConditionalGeneration.from_pretrained(str(folder), local_files_only=True)
    except Exception as err:  # safetensors, torch and transformers raise various types
        raise _fail(folder, f"the weights could not be loaded ({type(err).__name__}: {err})") \
            from err
    vocab = int(t5.config.vocab_size)
    if vocab < chronos.n_tokens:
        raise _fail(folder, f"the T5 vocabulary ({vocab}) is smaller than chronos_config.n_tokens "
                            f"({chronos.n_tokens})")
    if dtype is not None:
        t5 = t5.to(dtype)
    t5.eval()
    tokenizer = MeanScaleUniformBins(vocab_size=chronos.n_tokens, limits=chronos.limits,
                                     scaling="mean", context_length=chronos.context_length)
    return ChronosT5Model(t5, chronos).eval(), tokenizer, chronos


def fit_context_width(contexts: npt.ArrayLike, context_length: int) -> np.ndarray:
    """Contexts ``[n, C]`` as ``[n, context_length]``: the last points, or NaN left-padding."""
    arr = np.asarray(contexts, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"contexts: expected a 2-D array [n_series, length], got {arr.shape}")
    n, width = arr.shape
    if width >= context_length:
        return arr[:, width - context_length :]
    return np.concatenate([np.full((n, context_length - width), np.nan), arr], axis=1)


def forecast_checkpoint(
    path: str | os.PathLike,
    contexts: npt.ArrayLike,
    horizon: int,
    n_samples: int | None = None,
    temperature: float | None = None,
    top_k: int | None = None,
    top_p: float | None = None,
    batch_size: int = 32,
    device: str | torch.device = "cpu",
    seed: int = 0,
    progress: bool = False,
) -> np.ndarray:
    """Zero-shot sample forecasts ``[n, S, horizon]`` of the checkpoint folder ``path``.

    ``contexts`` float ``[n, C]`` (leading NaNs = shorter history, interior NaNs = missing) are
    cut or left-padded to the checkpoint's ``context_length``; blocks of its
    ``prediction_length`` roll out up to ``horizon``. ``n_samples``, ``temperature``, ``top_k``,
    ``top_p`` default (``None``) to the checkpoint's ``chronos_config`` values; ``top_k=1`` is
    greedy decoding, ``top_k=0`` disables top-k filtering. ``seed`` makes the result
    reproducible for the same ``batch_size``. Returns float64 ``[n, S, horizon]``.
    """
    from icml25.pipelines.wavetoken.forecaster import forecast

    model, tokenizer, chronos = load_chronos_checkpoint(path)
    return forecast(
        model, tokenizer, fit_context_width(contexts, chronos.context_length),
        horizon=horizon, prediction_length=chronos.prediction_length,
        n_samples=chronos.num_samples if n_samples is None else n_samples,
        temperature=chronos.temperature if temperature is None else temperature,
        top_k=chronos.top_k if top_k is None else top_k,
        top_p=chronos.top_p if top_p is None else top_p,
        batch_size=batch_size, device=device, seed=seed, progress=progress,
    )
