"""conf/paper's code path (Debian docs corpus + stdlib, gradient accumulation, AMP flag) and the
synthetic Markov source, at tiny size on CPU, through the node functions."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import torch
from omegaconf import OmegaConf

from icml25.core.params import ParameterError, validate_parameters
from icml25.pipelines.frugal import nodes
from icml25.pipelines.frugal.params import FrugalParams, ModelParams, OptimizerParams, TrainParams
from icml25.pipelines.frugal.pretraining import pretrain

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.usefixtures("one_thread")


def _conf(env: str) -> dict:
    base = OmegaConf.load(ROOT / "conf/base/parameters_frugal.yml")
    over = OmegaConf.load(ROOT / f"conf/{env}/parameters_frugal.yml")
    return OmegaConf.to_container(OmegaConf.merge(base, over))["frugal"]


@pytest.mark.parametrize("env", ["test", "paper"])
def test_config_environments_validate(env):
    p = validate_parameters(FrugalParams, _conf(env), "frugal")
    assert p.optimizers["galore_025"].proj_lr_scale == 0.25
    assert p.optimizers["frugal_logits_free"].lr_from == "frugal_block_025"
    if env == "paper":
        assert (p.model.d, p.model.layers, p.model.heads, p.model.ff) == (512, 8, 8, 1376)
        assert p.train.batch * p.train.grad_accum == 512 and p.train.amp
        # the official scripts' rates: nothing of conf/base's CPU selection carries over
        assert all(o.lr_grid is None for o in p.optimizers.values())
        assert all(o.proj_lr_scale == 1.0 for n, o in p.optimizers.items() if o.kind == "frugal")
        assert p.optimizers["frugal_block_025"].lr == 1e-3


def test_missing_optimizer_variant_is_a_parameter_error():
    conf = _conf("test")
    del conf["optimizers"]["badam_025"]
    with pytest.raises(ParameterError, match=r"frugal\.optimizers: .*missing \['badam_025'\]"):
        validate_parameters(FrugalParams, conf, "frugal")


def test_paper_code_path_runs_on_cpu_at_tiny_size(tmp_path):
    sources = tmp_path / "_sources" / "library"
    sources.mkdir(parents=True)
    for i in range(6):
        (sources / f"mod{i}.rst.txt").write_text(
            f"Module {i}\n========\n\nThis module provides functions number {i} for lists "
            "and strings. It returns a new object and raises ValueError on bad input.\n" * 3)
    (sources / "copy.rst.txt").write_text((sources / "mod0.rst.txt").read_text())
    conf = _conf("paper")
    conf["data"].update({"deb_sources": str(tmp_path / "_sources"), "max_files": 5})
    conf["tokenizer"]["vocab"] = 300
    text, meta = nodes.build_corpus(conf)
    assert meta["source"] == "python_doc_deb" and meta["n_docs"] > 6
    train_text, val_text, test_text, split = nodes.split_corpus(text, conf)
    # copy.rst.txt repeats mod0.rst.txt: removed before the split
    assert split["n_duplicates_removed"] >= 1 and split["n_val"] >= 1 and split["n_test"] >= 1
    tok = nodes.fit_tokenizer(train_text, conf)
    train_ids, val_ids, _ = nodes.tokenize(tok, train_text, val_text, test_text)
    p = validate_parameters(FrugalParams, conf, "frugal")
    tiny_model = ModelParams(d=16, layers=2, heads=2, ff=24, seq=16)
    train = TrainParams(**{**p.train.model_dump(), "steps": 4, "batch": 2, "grad_accum": 2,
                           "warmup": 1, "eval_every": 2, "log_every": 2, "val_windows": 4})
    _, rec = pretrain(train_ids, val_ids, 300, tiny_model, train,
                      p.optimizers["frugal_block_025"], 0, torch.device("cpu"),
                      progress=False)
    assert math.isfinite(rec["val_ppl"]) and rec["train_step_ms"] > 0


def test_gradient_accumulation_equals_one_big_batch():
    rng = np.random.default_rng(0)
    ids = rng.integers(0, 30, 4000).astype(np.int32)
    model = ModelParams(d=16, layers=1, heads=2, ff=24, seq=8)
    cfg = OptimizerParams(kind="frugal", role="method", lr=1e-2, update_gap=2)
    out = []
    for batch, accum in [(8, 1), (4, 2)]:
        train = TrainParams(steps=3, batch=batch, grad_accum=accum, warmup=1, eval_every=3,
                            val_windows=4)
        m, _ = pretrain(ids[:3500], ids[3500:], 30, model, train, cfg, 0, torch.device("cpu"),
                        progress=False)
        out.append(torch.cat([q.detach().ravel() for q in m.parameters()]))
    assert torch.allclose(out[0], out[1], atol=1e-5)


def test_synthetic_markov_source_records_its_optimal_perplexity():
    conf = _conf("test")
    conf["data"] = {"source": "synthetic_markov",
                    "markov": {"vocab": 16, "n_docs": 10, "doc_len": 200}}
    conf["tokenizer"] = {"kind": "char", "vocab": 300}
    text, meta = nodes.build_corpus(conf)
    assert 1 < meta["optimal_ppl"] < 16
    train_text, val_text, test_text, _ = nodes.split_corpus(text, conf)
    train_ids, val_ids, test_ids = nodes.tokenize(nodes.fit_tokenizer(train_text, conf),
                                                  train_text, val_text, test_text)
    assert train_ids.max() <= 16 and val_ids.size > 0 and test_ids.size > 0
