"""Measured equivariance of the steerable transformer encoder on real features
(``docs/papers/steerable.md``, "Metrics": feature equivariance error of the encoder)."""

from __future__ import annotations

import numpy as np
import torch

from icml25.pipelines.steerable.layers2d import rotate_field
from icml25.pipelines.steerable.models2d import SteerableNet


@torch.no_grad()
def encoder_equivariance_error(net: SteerableNet, images: np.ndarray) -> float:
    """``max_k max |enc(g^k F) - g^k enc(F)| / max |enc(F)|`` over quarter turns k = 1, 2, 3,
    where F is the conv stack's field of ``images`` and g acts by :func:`rotate_field`."""
    if net.encoder is None:
        raise ValueError("this steerable network has no transformer encoder")
    net.eval()
    x = torch.from_numpy(np.ascontiguousarray(images, dtype=np.float32))[:, None]
    field = net.conv_features(x)
    out = net.encoder(field)
    scale = out.abs().max().item()
    errs = [(net.encoder(rotate_field(field, k)) - rotate_field(out, k)).abs().max().item()
            for k in (1, 2, 3)]
    return max(errs) / scale
