"""Build each variant's network from the validated parameters (and rebuild it from the
metadata stored with its weights)."""

from __future__ import annotations

from typing import Any

from torch import nn

from icml25.pipelines.steerable.models2d import (
    CNNViT,
    PlainCNN,
    SteerableNet,
    SteerableNetConfig,
)
from icml25.pipelines.steerable.models3d import PlainCNN3d, SteerableNet3d, SteerableNet3dConfig
from icml25.pipelines.steerable.params import VARIANT_SPECS, SteerableParams
from icml25.pipelines.steerable.voxel_shapes import SHAPES


def architecture(p: SteerableParams, variant: str) -> dict[str, Any]:
    """A JSON-able description of ``variant``'s network (stored in the model file)."""
    kind, transformer, positional, _ = VARIANT_SPECS[variant]
    if kind == "steerable":
        s = p.steerable
        return {"kind": kind, "freq_cutoff": s.freq_cutoff, "n_radius": s.n_radius,
                "kernel_size": s.kernel_size, "widths": list(s.widths),
                "pool_after": list(s.pool_after), "nonlinear_after": list(s.nonlinear_after),
                "nonlinearity": s.nonlinearity, "cg_wrap": s.cg_wrap, "n_angle": s.n_angle,
                "filter_freqs": s.filter_freqs, "final_channels": s.final_channels,
                "head_hidden": s.head_hidden, "dropout": s.dropout, "readout": s.readout,
                "transformer_layers": p.transformer.layers if transformer else 0,
                "transformer_heads": p.transformer.heads, "positional": positional,
                "ff_mult": p.transformer.ff_mult, "layer_scale": p.transformer.layer_scale}
    if kind == "cnn":
        return {"kind": kind, "widths": list(p.cnn.widths)}
    return {"kind": kind, **p.vit.model_dump()}


def build_network(arch: dict[str, Any]) -> nn.Module:
    """The untrained network described by :func:`architecture`."""
    arch = dict(arch)
    kind = arch.pop("kind")
    if kind == "steerable":
        for key in ("widths", "pool_after", "nonlinear_after"):
            arch[key] = tuple(arch[key])
        return SteerableNet(SteerableNetConfig(**arch))
    if kind == "cnn":
        return PlainCNN(tuple(arch["widths"]))
    return CNNViT(**arch)


def architecture_3d(p: SteerableParams, variant: str) -> dict[str, Any]:
    """A JSON-able description of a 3D variant's network (stored in the model file)."""
    m, grid = p.models3d, p.data3d.grid
    if variant == "cnn_3d":
        return {"kind": "cnn3d", "widths": list(m.cnn_widths), "grid": grid,
                "n_classes": len(SHAPES)}
    return {"kind": "steerable3d", "grid": grid, "n_classes": len(SHAPES),
            "max_degree": m.max_degree, "kernel_size": m.kernel_size, "n_radius": m.n_radius,
            "widths": list(m.widths), "head_hidden": m.head_hidden, "dropout": m.dropout,
            "transformer_layers": m.transformer.layers if variant == "steer_tf_3d" else 0,
            "transformer_heads": m.transformer.heads, "positional": True,
            "ff_mult": m.transformer.ff_mult, "norm": m.norm}


def build_network_3d(arch: dict[str, Any]) -> nn.Module:
    """The untrained 3D network described by :func:`architecture_3d`."""
    arch = dict(arch)
    kind = arch.pop("kind")
    if kind == "cnn3d":
        return PlainCNN3d(tuple(arch["widths"]), arch["n_classes"], arch["grid"])
    arch["widths"] = tuple(arch["widths"])
    return SteerableNet3d(SteerableNet3dConfig(**arch))
