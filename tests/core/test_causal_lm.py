"""Incremental decoding with the KV cache gives the full forward pass's logits."""

import pytest
import torch

from icml25.core.causal_lm import LlamaConfig, LlamaLM

pytestmark = pytest.mark.usefixtures("one_thread")


def test_cached_decoding_matches_the_full_forward():
    torch.manual_seed(0)
    model = LlamaLM(LlamaConfig(vocab_size=50, d_model=32, n_layers=3, n_heads=4, d_ff=48,
                                max_seq_len=24)).eval()
    ids = torch.randint(50, (3, 20))
    with torch.no_grad():
        full = model(ids)
        cache = model.new_cache()
        steps = [model.forward_cached(ids[:, :7], cache)]
        steps += [model.forward_cached(ids[:, t:t + 1], cache) for t in range(7, 20)]
    assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)
    assert cache[0][0].shape == (3, 4, 20, 8)


def test_cache_misuse_is_refused():
    model = LlamaLM(LlamaConfig(vocab_size=10, d_model=8, n_layers=1, n_heads=2, d_ff=8,
                                max_seq_len=6))
    cache = model.new_cache()
    model.forward_cached(torch.zeros(1, 4, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="one new position"):
        model.forward_cached(torch.zeros(1, 2, dtype=torch.long), cache)
    model.forward_cached(torch.zeros(1, 1, dtype=torch.long), cache)
    model.forward_cached(torch.zeros(1, 1, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="exceeds max_seq_len"):
        model.forward_cached(torch.zeros(1, 1, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="cache has 2 layers"):
        model.forward_cached(torch.zeros(1, 1, dtype=torch.long), [[], []])
