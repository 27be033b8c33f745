"""Learning-rate selection per optimiser (each optimiser's rate picked from a small grid on one
seed). Not a pipeline node: a finished run's token streams are reused,
and the chosen rates go into ``conf/base/parameters_frugal.yml`` by hand with the sweep's table
in docs/papers/frugal.md.

Usage (in a project folder where ``kedro run --pipeline=frugal`` has run)::

    python -m icml25.pipelines.frugal.lr_sweep adamw=0.003,0.01 frugal_block_025=0.01@0.3

``lr@s`` also sets ``inactive_lr_scale`` to ``s`` (the state-free rate ``η_0 = s·η_f``) and
``lr@s@f`` also ``proj_lr_scale`` to ``f`` (``η_f = f·lr`` on the projectable tensors).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
from omegaconf import OmegaConf

from icml25.core.datasets import ArrayTreeDataset
from icml25.core.device import seed_everything, set_threads
from icml25.core.params import validate_parameters
from icml25.pipelines.frugal.corpus import vocab_size_of
from icml25.pipelines.frugal.params import FrugalParams
from icml25.pipelines.frugal.pretraining import pretrain


def sweep(project: Path, grid: dict[str, list[tuple[float, float | None, float | None]]],
          seed: int = 0) -> list[dict]:
    """Final validation perplexity of each (variant, lr) with the base config and ``seed``."""
    conf = OmegaConf.to_container(OmegaConf.load(project / "conf/base/parameters_frugal.yml"))
    p = validate_parameters(FrugalParams, conf["frugal"], "frugal")
    set_threads(p.num_threads)
    data = project / "data"
    # the token streams as the catalog stores them (numpy .npz, read without pickle)
    train_ids = ArrayTreeDataset(str(data / "05_model_input/frugal/train_ids.npz")).load()
    val_ids = ArrayTreeDataset(str(data / "05_model_input/frugal/val_ids.npz")).load()
    vocab = vocab_size_of((data / "04_feature/frugal/tokenizer.json").read_text())
    rows = []
    for variant, lrs in grid.items():
        for lr, scale, proj_scale in lrs:
            update = {"lr": lr}
            if scale is not None:
                update["inactive_lr_scale"] = scale
            if proj_scale is not None:
                update["proj_lr_scale"] = proj_scale
            cfg = p.optimizers[variant].model_copy(update=update)
            seed_everything(seed)
            _, rec = pretrain(train_ids, val_ids, vocab, p.model, p.train, cfg, seed,
                              torch.device("cpu"), progress=p.progress,
                              desc=f"{variant} lr {lr:g}")
            rows.append({"variant": variant, "lr": lr, "inactive_lr_scale":
                         cfg.inactive_lr_scale, "proj_lr_scale": cfg.proj_lr_scale,
                         "seed": seed, "val_ppl": rec["val_ppl"]})
            print(json.dumps(rows[-1]), flush=True)
    return rows


if __name__ == "__main__":
    def _point(text: str) -> tuple[float, float | None, float | None]:
        lr, scale, proj_scale = [*text.split("@"), None, None][:3]
        return (float(lr), float(scale) if scale else None,
                float(proj_scale) if proj_scale else None)

    grid = {k: [_point(x) for x in v.split(",")]
            for k, v in (arg.split("=", 1) for arg in sys.argv[1:])}
    sweep(Path.cwd(), grid)
