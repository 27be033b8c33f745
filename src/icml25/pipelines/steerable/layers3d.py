"""SE(3)-steerable layers on spherical-harmonic feature fields (Kundu & Kondor
2025, Sec. 3, in 3D; official ``Steerable/nn/Steerable3d``, read for facts).

A field is a real tensor ``F[b, k, c, x, y, z]`` whose component axis packs the degrees
l = 0..L (``k = l^2 + l + m``, m = -l..l) in the real spherical-harmonic basis of
:mod:`harmonics3d`; every channel carries all degrees. It rotates as
``(g_R F)_l(p) = D_l(R) F_l(R^{-1} p)``. Each layer maps such fields to such fields; on the 24
rotations of the voxel grid (:func:`harmonics3d.cube_rotations`) the equivariance is exact up to
float rounding, other rotations are exact only in the continuum.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from icml25.pipelines.steerable.harmonics import SteerableConfigError
from icml25.pipelines.steerable.harmonics3d import (
    check_degree,
    n_components,
    real_clebsch_gordan,
    real_sph_harm_all,
)

EPS = 1e-4


def check_field3d(x: torch.Tensor, max_degree: int, channels: int, name: str) -> None:
    """Refuse a tensor that is not a real ``[B, (L+1)^2, C, X, Y, Z]`` field of this layer."""
    K = n_components(max_degree)
    if torch.is_complex(x) or x.ndim != 6 or x.shape[1] != K or x.shape[2] != channels:
        raise SteerableConfigError(
            f"{name}: expected a real field [B, (L+1)^2={K}, C={channels}, X, Y, Z], got "
            f"{x.dtype} {tuple(x.shape)}")


def radial_profiles3d(size: int, n_radius: int) -> tuple[np.ndarray, np.ndarray]:
    """Gaussian shells ``tau_rho(r)`` on the offsets of an odd ``size^3`` kernel and the
    offsets themselves: rings at ``rho * R / n_radius`` (R = (size-1)/2), sigma 0.6 (0.4 for the
    outermost), zero at the centre (no direction there). Returns ``([n_radius, s, s, s],
    [s, s, s, 3])``. A profile that depends on |v| only is permuted, not changed, by the cube
    rotations, which keeps the conv exact on them."""
    if size < 3 or size % 2 == 0:
        raise SteerableConfigError(f"kernel_size: got {size}; expected an odd integer >= 3")
    if not 1 <= n_radius <= (size - 1) // 2:
        raise SteerableConfigError(f"n_radius: got {n_radius}; expected 1..{(size - 1) // 2} "
                                   f"shells for a kernel of size {size}")
    c = (size - 1) / 2
    v = np.stack(np.meshgrid(*[np.arange(size) - c] * 3, indexing="ij"), -1)
    r = np.linalg.norm(v, axis=-1)
    tau = np.empty((n_radius, size, size, size))
    for k in range(n_radius):
        sigma = 0.4 if k == n_radius - 1 else 0.6
        tau[k] = np.exp(-((r - (k + 1) * c / n_radius) ** 2) / (2 * sigma**2))
    tau[:, r == 0] = 0.0
    tau /= np.linalg.norm(tau.reshape(n_radius, -1), axis=1)[:, None, None, None]
    return tau, v


class SteerableConv3d(nn.Module):
    """Steerable 3D convolution with the basis ``psi_{rho, l2, m2}(v) = tau_rho(|v|)
    Y_{l2}^{m2}(v / |v|)``.

    Output degree l hears input degree l1 through filter degree l2 with the Clebsch-Gordan
    coupling (``|l1 - l2| <= l <= l1 + l2``, l2 <= ``filter_degree``):
    ``out[l, m, o] = sum_{l1, l2, c, rho} w[(l, l1, l2), o, c, rho] sum_{m1, m2}
    C^{l}_{l1 l2}[m1, m2, m] (psi_{rho, l2, m2} corr in[l1, m1, c])``.
    ``in_degree=0`` is the official "Type 1" conv (scalar input channels, e.g. voxels);
    otherwise "Type 2". The kernel ``[K_out*C_out, K_in*C_in, s, s, s]`` is assembled from the
    fixed coupled basis and the weights on every forward pass, then one ``conv3d`` runs.
    Weights are normal with std ``1/sqrt(fan_in)``.
    """

    def __init__(self, in_channels: int, out_channels: int, in_degree: int, out_degree: int,
                 kernel_size: int = 3, n_radius: int = 1, filter_degree: int | None = None,
                 padding: str = "same") -> None:
        super().__init__()
        self.in_degree = check_degree(in_degree, "in_degree")
        self.out_degree = check_degree(out_degree, "out_degree")
        filter_degree = self.in_degree + self.out_degree if filter_degree is None \
            else check_degree(filter_degree, "filter_degree")
        if padding not in ("same", "valid"):
            raise SteerableConfigError(f"padding: got {padding!r}; expected same or valid")
        tau, v = radial_profiles3d(kernel_size, n_radius)
        Y = real_sph_harm_all(filter_degree, v)  # [s, s, s, (Lf+1)^2]; 0-vector -> constant
        k_in, k_out = n_components(self.in_degree), n_components(self.out_degree)
        paths = [(ell, l1, l2) for ell in range(self.out_degree + 1)
                 for l1 in range(self.in_degree + 1)
                 for l2 in range(filter_degree + 1) if abs(l1 - l2) <= ell <= l1 + l2]
        if not paths:
            raise SteerableConfigError("no degree path couples the input to the output")
        basis = np.zeros((len(paths), k_out, k_in, n_radius, *tau.shape[1:]))
        for p, (ell, l1, l2) in enumerate(paths):
            C = real_clebsch_gordan(l1, l2, ell)  # [m1, m2, m]
            Yl2 = Y[..., l2 * l2:(l2 + 1) ** 2]  # [s, s, s, m2]
            psi = tau[:, None] * np.moveaxis(Yl2, -1, 0)[None]  # [rho, m2, s, s, s]
            block = np.einsum("ijm,rjxyz->mirxyz", C, psi)
            basis[p, ell * ell:(ell + 1) ** 2, l1 * l1:(l1 + 1) ** 2] = block
        self.register_buffer("basis", torch.from_numpy(basis.astype(np.float32)),
                             persistent=False)
        # each output degree sums over its paths: normalise the fan-in over them
        per_out = np.array([sum(1 for q in paths if q[0] == ell) for ell, _, _ in paths])
        fan_in = in_channels * n_radius * per_out
        w = torch.randn(len(paths), out_channels, in_channels, n_radius)
        self.weight = nn.Parameter(w / torch.from_numpy(np.sqrt(fan_in)).float()[:, None, None,
                                                                                  None])
        self.paths = paths
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size = kernel_size
        self.padding = kernel_size // 2 if padding == "same" else 0

    def kernel(self) -> torch.Tensor:
        K = torch.einsum("pkjrxyz,pocr->kojcxyz", self.basis, self.weight)
        k_out, o, k_in, c = K.shape[:4]
        return K.reshape(k_out * o, k_in * c, *K.shape[4:])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.in_degree == 0 and x.ndim == 5:
            x = x[:, None]  # scalar channels [B, C, X, Y, Z] -> degree-0 field
        check_field3d(x, self.in_degree, self.in_channels, "steerable conv3d")
        b, k, c = x.shape[:3]
        out = F.conv3d(x.reshape(b, k * c, *x.shape[3:]), self.kernel(), padding=self.padding)
        return out.reshape(b, n_components(self.out_degree), self.out_channels, *out.shape[2:])


class CGNonlinearity3d(nn.Module):
    """Quadratic Clebsch-Gordan nonlinearity per channel:
    ``out[l, c] = sum_{l1 <= l2} w[(l, l1, l2), c] C^{l}_{l1 l2} (F[l1, c] x F[l2, c])``
    over every coupling the selection rule allows within degrees 0..L."""

    def __init__(self, channels: int, max_degree: int) -> None:
        super().__init__()
        L = check_degree(max_degree)
        K = n_components(L)
        paths = [(ell, l1, l2) for l1 in range(L + 1) for l2 in range(l1, L + 1)
                 for ell in range(abs(l1 - l2), min(l1 + l2, L) + 1)]
        Q = np.zeros((len(paths), K, K, K))
        for p, (ell, l1, l2) in enumerate(paths):
            Q[p, l1 * l1:(l1 + 1) ** 2, l2 * l2:(l2 + 1) ** 2, ell * ell:(ell + 1) ** 2] = \
                real_clebsch_gordan(l1, l2, ell)
        self.register_buffer("Q", torch.from_numpy(Q.astype(np.float32)), persistent=False)
        per_out = np.array([sum(1 for q in paths if q[0] == ell) for ell, _, _ in paths])
        w = torch.randn(len(paths), channels) / torch.from_numpy(np.sqrt(per_out)).float()[:, None]
        self.weight = nn.Parameter(w)
        self.max_degree, self.channels = L, channels
        i, j = np.triu_indices(K)
        self.register_buffer("pair_i", torch.from_numpy(i), persistent=False)
        self.register_buffer("pair_j", torch.from_numpy(j), persistent=False)
        # the diagonal pair appears once in sum_{i,j}; (C + C^T) counted it twice
        self.register_buffer("pair_w", torch.from_numpy(np.where(i == j, 0.5, 1.0)).float(),
                             persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        check_field3d(x, self.max_degree, self.channels, "CG nonlinearity 3d")
        # fold the weights into the coupling, keep the unordered pairs i <= j (the product is
        # symmetric in them), then one matrix product over the pair axis
        coupling = torch.einsum("pijk,pc->ijkc", self.Q, self.weight)
        coupling = (coupling + coupling.transpose(0, 1))[self.pair_i, self.pair_j] \
            * self.pair_w[:, None, None]  # [P2, K, C]
        b, K, C = x.shape[:3]
        flat = x.reshape(b, K, C, -1)
        prod = flat[:, self.pair_i] * flat[:, self.pair_j]  # [B, P2, C, S]
        out = torch.einsum("bpcs,pkc->bkcs", prod, coupling)
        return out.reshape(x.shape)


def frequency_norm3d(x: torch.Tensor, comp_dim: int = 1) -> torch.Tensor:
    """"SE3BatchNorm" of the official code: divide every (b, c, position) by the L2 norm over
    all components ``||F[:, :, c, p]||`` (invariant, since D(R) is orthogonal)."""
    return x / (torch.sqrt(x.square().sum(comp_dim, keepdim=True) + 1e-12) + EPS)


class FieldBatchNorm3d(nn.Module):
    """Equivariant batch normalisation of a field (Weiler et al. 2018, "3D Steerable CNNs"):
    each channel is divided by the root mean square of its rotation-invariant norm
    ``||F[:, :, c, p]||`` over the batch and the positions (running average in eval mode),
    then multiplied by a learned gain per degree and channel. Unlike the per-position
    :func:`frequency_norm3d` it keeps the relative magnitude of the positions, so a voxel of
    background noise stays small instead of being blown up to unit norm."""

    def __init__(self, channels: int, max_degree: int, momentum: float = 0.1) -> None:
        super().__init__()
        L = check_degree(max_degree)
        self.momentum = momentum
        self.register_buffer("running_sq", torch.ones(channels))
        self.gain = nn.Parameter(torch.ones(L + 1, channels))
        deg = np.concatenate([np.full(2 * ell + 1, ell) for ell in range(L + 1)])
        self.register_buffer("deg", torch.from_numpy(deg), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            sq = x.detach().square().sum(1).transpose(0, 1).reshape(x.shape[2], -1).mean(1)
            self.running_sq.mul_(1 - self.momentum).add_(self.momentum * sq)
            sq = x.square().sum(1).transpose(0, 1).reshape(x.shape[2], -1).mean(1)
        else:
            sq = self.running_sq
        factor = self.gain[self.deg] / torch.sqrt(sq + 1e-5)  # [K, C]
        return x * factor.reshape(1, *factor.shape, *([1] * (x.ndim - 3)))


class NormNonlinearity3d(nn.Module):
    """``F_l * s(|F_l| + b[l, c]) / (|F_l| + 1e-4)`` per degree and channel (acts on the
    rotation-invariant norms only); ``x: [..., (L+1)^2, C]`` (token layout)."""

    def __init__(self, channels: int, max_degree: int) -> None:
        super().__init__()
        L = check_degree(max_degree)
        self.bias = nn.Parameter(torch.zeros(L + 1, channels))
        deg = np.concatenate([np.full(2 * ell + 1, ell) for ell in range(L + 1)])
        onehot = np.zeros((n_components(L), L + 1), dtype=np.float32)
        onehot[np.arange(len(deg)), deg] = 1.0
        self.register_buffer("onehot", torch.from_numpy(onehot), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        norms = torch.sqrt(torch.einsum("...kc,kl->...lc", x.square(), self.onehot) + 1e-12)
        gain = F.gelu(norms + self.bias) / (norms + EPS)
        return x * torch.einsum("...lc,kl->...kc", gain, self.onehot)


def avg_pool3d_field(x: torch.Tensor, size: int = 2) -> torch.Tensor:
    """Average pooling of a field (exact under the cube rotations for sides divisible by
    ``size``)."""
    b, k, c = x.shape[:3]
    if any(s % size for s in x.shape[3:]):
        raise SteerableConfigError(f"avg pool {size}: map {tuple(x.shape[3:])} is not divisible "
                                   f"by {size}; odd sizes break exact rotation equivariance")
    out = F.avg_pool3d(x.reshape(b, k * c, *x.shape[3:]), size)
    return out.reshape(b, k, c, *out.shape[2:])


def norm_flatten3d(x: torch.Tensor, max_degree: int) -> torch.Tensor:
    """Invariant read-out: the L2 norm of each degree's components at every position, then
    the mean over positions: ``[B, (L+1) * C]``. (Averaging first, as the 2D read-out does
    after its whole-map conv, would cancel the degree-1 fields of centrally symmetric shapes.)
    """
    b, k, c = x.shape[:3]
    sq = x.reshape(b, k, c, -1).square()
    return torch.cat([torch.sqrt(sq[:, ell * ell:(ell + 1) ** 2].sum(1) + 1e-12).mean(-1)
                      for ell in range(max_degree + 1)], 1)
