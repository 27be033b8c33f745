"""The real-model path: a tiny HF causal LM built from a config, a JumpReLU SAE file and a jsonl
preference file, trained one FPO step (no download)."""

import json

import numpy as np
import pytest
import torch

from icml25.pipelines.fpo.hf import (
    PretrainedSAE,
    fpo_pair_stats,
    load_hf_causal_lm,
    load_pretrained_sae,
    read_preference_jsonl,
    reference_cache,
)
from icml25.pipelines.fpo.losses import margin_u, preference_loss

transformers = pytest.importorskip("transformers")
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tiny_model_dir(tmp_path_factory):
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32,
                                   num_hidden_layers=2, num_attention_heads=2,
                                   num_key_value_heads=2, max_position_embeddings=32)
    path = tmp_path_factory.mktemp("tiny_llama")
    transformers.LlamaForCausalLM(cfg).save_pretrained(path)
    return path


def _sae_file(tmp_path, d=16, m=24, jump=True):
    rng = np.random.default_rng(0)
    arrays = {"W_enc": rng.normal(size=(d, m)).astype(np.float32),
              "b_enc": np.zeros(m, np.float32),
              "W_dec": rng.normal(size=(m, d)).astype(np.float32),
              "b_dec": np.zeros(d, np.float32)}
    if jump:
        arrays["threshold"] = np.full(m, 0.5, np.float32)
    path = tmp_path / "sae.npz"
    np.savez(path, **arrays)
    return path


def _tokenize(text):
    return [3 + (sum(map(ord, w)) % 30) for w in text.split()]


def test_one_fpo_step_on_a_local_hf_model(tiny_model_dir, tmp_path):
    model = load_hf_causal_lm(tiny_model_dir)
    reference = load_hf_causal_lm(tiny_model_dir)
    sae = load_pretrained_sae(_sae_file(tmp_path))
    prefs = tmp_path / "prefs.jsonl"
    prefs.write_text("\n".join(json.dumps(r) for r in [
        {"prompt": "tell me about rivers", "chosen": "rivers flow to the sea",
         "rejected": "no"},
        {"prompt": "greet me", "chosen": "hello there friend", "rejected": "go away now"},
        {"prompt": "same", "chosen": "a b", "rejected": "a b"},
        {"prompt": "empty", "chosen": "", "rejected": "x"},
        {"prompt": "long " * 40, "chosen": "y", "rejected": "z"}]) + "\n")
    pairs, skipped = read_preference_jsonl(prefs, _tokenize, max_len=32)
    assert len(pairs) == 2 and skipped == {"identical": 1, "empty_response": 1, "too_long": 1}

    cache = reference_cache(reference, sae, pairs, layer=1)
    model.train()
    stats = fpo_pair_stats(model, sae, pairs, cache, layer=1, beta=0.1, k=4)
    # the policy starts as the reference: no margin, no feature drift, loss ln 2
    assert torch.allclose(stats.d_w, torch.zeros(2), atol=1e-8)
    assert torch.allclose(stats.avg_w, cache["avg_w"], atol=1e-5)
    loss = preference_loss(margin_u("fpo", stats, beta=0.1, alpha=0.5))
    assert float(loss.detach()) == pytest.approx(np.log(2), abs=1e-5)
    loss.backward()
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.parameters())
    # the cache of these pairs is refused for the pairs in another order
    with pytest.raises(ValueError, match=r"ref_cache: .*2 of 2 pairs differ: pair 0: prompt, "
                                         r"chosen, rejected"):
        fpo_pair_stats(model, sae, pairs[::-1], cache, layer=1, beta=0.1, k=4)


def test_jumprelu_sae_encodes_with_its_threshold(tmp_path):
    sae = load_pretrained_sae(_sae_file(tmp_path, d=4, m=6))
    h = torch.randn(5, 4)
    pre = (h - sae.b_dec) @ sae.W_enc + sae.b_enc
    assert torch.equal(sae.encode(h), pre * (pre > 0.5))
    relu = PretrainedSAE({k: getattr(sae, k) for k in ("W_enc", "b_enc", "W_dec", "b_dec")})
    assert torch.equal(relu.encode(h), torch.relu(pre))


def test_bad_files_are_refused_by_name(tmp_path, tiny_model_dir):
    with pytest.raises(FileNotFoundError, match=r"no config\.json"):
        load_hf_causal_lm(tmp_path)
    np.savez(tmp_path / "bad.npz", W_enc=np.zeros((4, 6)), b_enc=np.zeros(6),
             W_dec=np.zeros((5, 4)), b_dec=np.zeros(4))
    with pytest.raises(ValueError, match="W_dec has shape"):
        load_pretrained_sae(tmp_path / "bad.npz")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a", "chosen": "b", "rejected": "c"}\n{"prompt": "x"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not a"):
        read_preference_jsonl(bad, _tokenize, 32)
