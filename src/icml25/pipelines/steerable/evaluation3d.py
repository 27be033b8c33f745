"""Measured invariance and equivariance of the 3D classifiers (``docs/papers/steerable.md``,
"Metrics"): exact for the group elements the voxel grid allows, the rest reported separately.

- exact: the 23 non-trivial rotations of the cube, which permute voxels without interpolation;
- interpolated: random rotations of SO(3) applied with trilinear interpolation about the grid
  centre (never exact: the resampling itself changes the input).
"""

from __future__ import annotations

import numpy as np
import torch
from scipy import ndimage
from scipy.spatial.transform import Rotation
from torch import nn

from icml25.pipelines.steerable.classifier_training import predict_logits
from icml25.pipelines.steerable.harmonics3d import cube_rotations, rotate_field3d, rotate_voxels
from icml25.pipelines.steerable.models3d import SteerableNet3d


def _tensor(voxels: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(voxels, dtype=np.float32))[:, None]


def rotation_angles(rotations: np.ndarray) -> np.ndarray:
    """Angle (radians, 0..pi) of each 3x3 rotation: ``arccos((trace R - 1) / 2)``."""
    trace = np.trace(np.asarray(rotations), axis1=-2, axis2=-1)
    return np.arccos(np.clip((trace - 1) / 2, -1.0, 1.0))


def invariance_error_cube(model: nn.Module, voxels: np.ndarray) -> float:
    """``max_R max |f(R x) - f(x)| / max |f(x)|`` over the 23 non-trivial cube rotations."""
    x = _tensor(voxels)
    base = predict_logits(model, x)
    scale = base.abs().max().item()
    return max((predict_logits(model, rotate_voxels(x, R)) - base).abs().max().item()
               for R in cube_rotations()[1:]) / scale


def rotate_voxels_interpolated(voxels: np.ndarray, rotation: np.ndarray) -> np.ndarray:
    """Rotate each grid ``[N, G, G, G]`` by ``rotation`` about its centre, trilinear, zero
    outside: ``out[p] = in[R^T p]``."""
    R = np.asarray(rotation, dtype=float)
    c = (np.asarray(voxels.shape[1:]) - 1) / 2
    offset = c - R.T @ c
    return np.stack([ndimage.affine_transform(v, R.T, offset=offset, order=1, mode="constant",
                                              cval=0.0) for v in voxels]).astype(np.float32)


def invariance_error_interpolated(model: nn.Module, voxels: np.ndarray, n_rotations: int,
                                  seed: int) -> float:
    """The same relative logit change, max over ``n_rotations`` random rotations (seeded)."""
    base = predict_logits(model, voxels)
    scale = base.abs().max().item()
    rotations = Rotation.random(n_rotations, random_state=seed).as_matrix()
    return max((predict_logits(model, rotate_voxels_interpolated(voxels, R)) - base)
               .abs().max().item() for R in rotations) / scale


@torch.no_grad()
def encoder_equivariance_error3d(net: SteerableNet3d, voxels: np.ndarray) -> float:
    """``max_R max |enc(g_R F) - g_R enc(F)| / max |enc F|`` over the 23 non-trivial cube
    rotations, F the conv stack's field of ``voxels``."""
    if net.encoder is None:
        raise ValueError("this steerable network has no transformer encoder")
    net.eval()
    field = net.conv_features(_tensor(voxels))
    out = net.encoder(field)
    L = net.cfg.max_degree
    return max((net.encoder(rotate_field3d(field, R, L)) - rotate_field3d(out, R, L))
               .abs().max().item() for R in cube_rotations()[1:]) / out.abs().max().item()
