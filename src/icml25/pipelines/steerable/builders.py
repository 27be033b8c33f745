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
from icml25.pipelines.steerable.params import VARIANT_SPECS, SteerableParams


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
                "head_hidden": s.head_hidden, "dropout": s.dropout,
                "transformer_layers": p.transformer.layers if transformer else 0,
                "transformer_heads": p.transformer.heads, "positional": positional,
                "ff_mult": p.transformer.ff_mult}
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
