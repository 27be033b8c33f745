"""Unit tests of the wavetoken encoder-decoder (training loss, decoding)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from icml25.pipelines.wavetoken.model import (
    IGNORE_INDEX,
    Seq2SeqConfig,
    Seq2SeqForecaster,
    relative_position_bucket,
    sample_categorical,
    warp_logits,
)

POSITIONS = ["learned", "t5_relative"]


def tiny_config(**overrides) -> Seq2SeqConfig:
    base = dict(
        vocab_size=40,
        d_model=16,
        n_heads=2,
        n_encoder_layers=2,
        n_decoder_layers=2,
        d_ff=32,
        dropout=0.0,
        max_context_tokens=20,
        max_target_tokens=12,
    )
    base.update(overrides)
    return Seq2SeqConfig(**base)


def make_inputs(batch: int = 3, length: int = 9, vocab: int = 40, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(2, vocab, (batch, length), generator=g)
    ids[:, -1] = 1  # EOS
    mask = torch.ones(batch, length, dtype=torch.bool)
    # left padding on the first row, as the tokenizers produce for short contexts
    ids[0, :4] = 0
    mask[0, :4] = False
    return ids, mask


@pytest.mark.parametrize("position", POSITIONS)
def test_shapes(position):
    model = Seq2SeqForecaster(tiny_config(position=position)).eval()
    ids, mask = make_inputs()
    dec = torch.randint(2, 40, (3, 6))
    assert model.encode(ids, mask).shape == (3, 9, 16)
    assert model(ids, mask, dec).shape == (3, 6, 40)
    out = model.generate(ids, mask, n_tokens=5, n_samples=4)
    assert out.shape == (3, 4, 5)
    assert out.dtype == torch.long


def test_uniform_logits_give_ln_vocab():
    # uniform logits over V = 1024 give CE = ln 1024
    model = Seq2SeqForecaster(tiny_config(vocab_size=1024, dropout=0.1))
    with torch.no_grad():
        model.shared.weight.zero_()  # tied output projection -> all logits exactly 0
    ids, mask = make_inputs(vocab=1024)
    labels = torch.randint(2, 1024, (3, 7))
    labels[1, 5:] = IGNORE_INDEX
    loss = model.loss(ids, mask, labels)
    assert abs(loss.item() - math.log(1024)) < 1e-4


@pytest.mark.parametrize("position", POSITIONS)
def test_incremental_decoding_matches_full_forward(position):
    torch.manual_seed(1)
    model = Seq2SeqForecaster(tiny_config(position=position)).eval()
    ids, mask = make_inputs()
    dec = torch.randint(0, 40, (3, 8))
    full = model(ids, mask, dec)
    state = model.init_decoder_state(model.encode(ids, mask), mask)
    steps = [model.decode(dec[:, t : t + 1], state) for t in range(dec.shape[1])]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=0)
    # mixed chunk sizes use the same cache
    state = model.init_decoder_state(model.encode(ids, mask), mask)
    chunks = [model.decode(dec[:, :3], state), model.decode(dec[:, 3:4], state)]
    chunks.append(model.decode(dec[:, 4:], state))
    torch.testing.assert_close(torch.cat(chunks, dim=1), full, atol=1e-5, rtol=0)


@pytest.mark.parametrize("position", POSITIONS)
def test_shared_cross_attention_for_samples_matches_repeated_inputs(position):
    # generate keeps one copy of the encoder keys/values per series for all its samples
    torch.manual_seed(5)
    model = Seq2SeqForecaster(tiny_config(position=position)).eval()
    ids, mask = make_inputs()
    n = 4
    dec = torch.randint(2, 40, (3 * n, 5))
    expected = model(ids.repeat_interleave(n, 0), mask.repeat_interleave(n, 0), dec)
    state = model.init_decoder_state(model.encode(ids, mask), mask).repeat_interleave(n)
    steps = [model.decode(dec[:, t : t + 1], state) for t in range(dec.shape[1])]
    torch.testing.assert_close(torch.cat(steps, dim=1), expected, atol=1e-5, rtol=0)


def test_padding_is_invisible():
    # a left-padded row gives the same logits as the same tokens without the padding
    model = Seq2SeqForecaster(tiny_config(position="t5_relative")).eval()
    ids, mask = make_inputs()
    dec = torch.randint(2, 40, (1, 5))
    padded = model(ids[:1], mask[:1], dec)
    trimmed = model(ids[:1, 4:], mask[:1, 4:], dec)
    torch.testing.assert_close(padded, trimmed, atol=1e-5, rtol=0)


class PrefersSpecials(Seq2SeqForecaster):
    """A model whose logits overwhelmingly favour PAD and EOS."""

    def decode(self, decoder_input_ids, state):
        logits = super().decode(decoder_input_ids, state).clone()
        logits[..., self.config.pad_id] += 1e4
        logits[..., self.config.eos_id] += 1e4
        return logits


@pytest.mark.parametrize(("top_k", "top_p"), [(50, 1.0), (1, 1.0), (0, 0.5)])
def test_pad_and_eos_never_sampled(top_k, top_p):
    model = PrefersSpecials(tiny_config())
    ids, mask = make_inputs()
    out = model.generate(ids, mask, n_tokens=6, n_samples=5, top_k=top_k, top_p=top_p)
    assert int(out.min()) >= 2


def test_loss_ignores_minus_100():
    torch.manual_seed(2)
    model = Seq2SeqForecaster(tiny_config()).eval()
    ids, mask = make_inputs()
    labels = torch.randint(2, 40, (3, 6))
    labels[0, 4:] = IGNORE_INDEX
    labels[2, 1] = IGNORE_INDEX
    decoder_input = model.shift_right(labels)
    logits = model(ids, mask, decoder_input)
    valid = labels != IGNORE_INDEX
    expected = F.cross_entropy(logits[valid], labels[valid])
    torch.testing.assert_close(model.loss(ids, mask, labels), expected)


def test_shift_right_uses_pad_as_start_and_for_ignored_labels():
    model = Seq2SeqForecaster(tiny_config())
    labels = torch.tensor([[5, 6, 7, 1], [5, IGNORE_INDEX, 7, IGNORE_INDEX]])
    expected = torch.tensor([[0, 5, 6, 7], [0, 5, 0, 7]])
    assert torch.equal(model.shift_right(labels), expected)


def test_training_reduces_loss_on_copy_task():
    torch.manual_seed(3)
    model = Seq2SeqForecaster(tiny_config(vocab_size=12, d_model=32, n_heads=4, d_ff=64))
    optimiser = torch.optim.AdamW(model.parameters(), lr=3e-3)
    g = torch.Generator().manual_seed(3)

    def batch():
        tokens = torch.randint(2, 12, (16, 6), generator=g)
        eos = torch.ones(16, 1, dtype=torch.long)
        ids = torch.cat([tokens, eos], dim=1)
        return ids, torch.ones_like(ids, dtype=torch.bool), torch.cat([tokens, eos], dim=1)

    losses = []
    model.train()
    for _ in range(60):
        ids, mask, labels = batch()
        loss = model.loss(ids, mask, labels)
        optimiser.zero_grad()
        loss.backward()
        optimiser.step()
        losses.append(loss.item())
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.6 * first


def test_generate_is_deterministic_for_a_seeded_generator():
    model = Seq2SeqForecaster(tiny_config())
    ids, mask = make_inputs()

    def draw(seed):
        g = torch.Generator().manual_seed(seed)
        return model.generate(ids, mask, n_tokens=5, n_samples=6, generator=g)

    assert torch.equal(draw(7), draw(7))
    assert not torch.equal(draw(7), draw(8))


def test_generate_encodes_once_and_matches_greedy_full_forward():
    torch.manual_seed(4)
    model = Seq2SeqForecaster(tiny_config(position="t5_relative"))
    model.train()  # generate must switch dropout off and restore the mode
    ids, mask = make_inputs()
    calls = []
    original = model.encode

    def counting_encode(input_ids, attention_mask):
        calls.append(input_ids.shape[0])
        return original(input_ids, attention_mask)

    model.encode = counting_encode
    out = model.generate(ids, mask, n_tokens=6, n_samples=3, top_k=1)
    assert calls == [3]  # once, on the B series (not B * n_samples rows)
    assert model.training
    # top_k = 1 is greedy: every sample equals argmax decoding by full forward passes
    model.eval()
    dec = torch.zeros(3, 1, dtype=torch.long)
    for _ in range(6):
        logits = model(ids, mask, dec)[:, -1]
        logits[:, :2] = float("-inf")
        dec = torch.cat([dec, logits.argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(out, dec[:, None, 1:].expand(3, 3, 6))


def test_warp_logits_follows_hf_rules():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.2]]))
    inf = float("-inf")
    # top-k keeps the k largest
    assert torch.isinf(warp_logits(logits, top_k=2, top_p=1.0)[0, 2])
    # top-p: remove tokens whose ascending cumulative probability is <= 1 - top_p
    kept = torch.isfinite(warp_logits(logits, top_k=0, top_p=0.6))
    assert kept.tolist() == [[True, True, False]]
    kept = torch.isfinite(warp_logits(logits, top_k=0, top_p=0.5))
    assert kept.tolist() == [[True, False, False]]
    # temperature divides the logits; defaults leave them unchanged
    torch.testing.assert_close(warp_logits(logits, temperature=2.0, top_k=0), logits / 2)
    torch.testing.assert_close(warp_logits(logits, top_k=0), logits)
    assert warp_logits(torch.tensor([[inf, 0.0]]), top_k=0, top_p=0.1)[0, 1] == 0.0


def test_sample_categorical_matches_the_distribution_and_skips_zeros():
    probs = torch.tensor([[0.0, 0.2, 0.0, 0.5, 0.3, 0.0]]).expand(40000, 6)
    g = torch.Generator().manual_seed(0)
    ids = sample_categorical(probs, g)[:, 0]
    freq = torch.bincount(ids, minlength=6).float() / ids.numel()
    torch.testing.assert_close(freq, probs[0], atol=0.01, rtol=0)
    assert freq[[0, 2, 5]].sum() == 0
    one_hot = torch.zeros(5, 6)
    one_hot[:, 5] = 1.0
    assert sample_categorical(one_hot, g)[:, 0].tolist() == [5] * 5


def test_relative_position_buckets_match_t5():
    rel = torch.tensor([0, -1, 1, -20, 20, -500, 500])
    # bidirectional: 16 buckets per direction, 8 exact; positive offsets shifted by 16
    assert relative_position_bucket(rel, bidirectional=True).tolist() == [0, 1, 17, 10, 26, 15, 31]
    # causal: only the past counts, 32 buckets, future offsets -> bucket 0
    assert relative_position_bucket(rel, bidirectional=False).tolist() == [0, 1, 0, 17, 0, 31, 0]


@pytest.mark.parametrize("position", POSITIONS)
def test_save_and_load_round_trip(tmp_path, position):
    """Through the project's model dataset: safetensors state dict + config in the metadata."""
    from icml25.core.datasets import TorchModelDataset

    model = Seq2SeqForecaster(tiny_config(position=position)).eval()
    dataset = TorchModelDataset(filepath=str(tmp_path / "model.safetensors"))
    dataset.save({"state_dict": model.state_dict(),
                  "metadata": {"model_config": model.config.to_dict()}})
    entry = dataset.load()
    loaded = Seq2SeqForecaster.from_state(entry["metadata"]["model_config"],
                                          entry["state_dict"]).eval()
    assert loaded.config == model.config
    ids, mask = make_inputs()
    dec = torch.randint(2, 40, (3, 4))
    torch.testing.assert_close(loaded(ids, mask, dec), model(ids, mask, dec), atol=0, rtol=0)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"d_model": 30, "n_heads": 4}, "d_model"),
        ({"dropout": 1.0}, "dropout"),
        ({"position": "rotary"}, "position"),
        ({"eos_id": 0}, "eos_id"),
        ({"vocab_size": 2}, "vocab_size"),
        ({"n_encoder_layers": 0}, "n_encoder_layers"),
        ({"pad_id": 40}, "pad_id"),
        ({"d_ff": 2.5}, "d_ff"),
    ],
)
def test_config_validation_names_the_field(overrides, field):
    with pytest.raises(ValueError, match=field):
        tiny_config(**overrides)


def test_config_dict_round_trip_and_unknown_keys():
    config = tiny_config(position="t5_relative")
    assert Seq2SeqConfig.from_dict(config.to_dict()) == config
    with pytest.raises(ValueError, match="unknown"):
        Seq2SeqConfig.from_dict({**config.to_dict(), "d_kv": 8})


def test_bad_inputs_raise():
    model = Seq2SeqForecaster(tiny_config())
    ids, mask = make_inputs()
    with pytest.raises(ValueError, match="max_context_tokens"):
        long_ids = torch.full((1, 21), 5)
        model.encode(long_ids, torch.ones_like(long_ids, dtype=torch.bool))
    with pytest.raises(ValueError, match="max_target_tokens"):
        model.generate(ids, mask, n_tokens=13, n_samples=1)
    with pytest.raises(ValueError, match="input_ids"):
        model.encode(torch.full((1, 3), 40), torch.ones(1, 3, dtype=torch.bool))
    with pytest.raises(ValueError, match="attention_mask"):
        model.encode(ids, torch.zeros_like(mask))
    with pytest.raises(ValueError, match="top_p"):
        model.generate(ids, mask, n_tokens=2, top_p=0.0)
    with pytest.raises(ValueError, match="temperature"):
        model.generate(ids, mask, n_tokens=2, temperature=0.0)


def test_micro_batches_weighted_by_labelled_tokens_give_the_whole_batch_gradient():
    # rows with different numbers of ignored labels: the token mean over the whole batch is
    # the labelled_tokens-weighted mean of the micro-batches' token means
    from icml25.core.training import split_batch
    from icml25.pipelines.wavetoken.pretraining import labelled_tokens

    torch.manual_seed(0)
    model = Seq2SeqForecaster(tiny_config())
    ids, mask = make_inputs(batch=4)
    labels = torch.randint(2, 40, (4, 6))
    labels[0, 2:] = IGNORE_INDEX
    labels[3, 5:] = IGNORE_INDEX
    batch = (ids, mask, labels)
    model.zero_grad()
    model.loss(*batch).backward()
    whole = {n: p.grad.clone() for n, p in model.named_parameters()}
    parts = split_batch(batch, 2)
    weights = [labelled_tokens(part) for part in parts]
    assert weights == [8.0, 11.0]
    model.zero_grad()
    for part, w in zip(parts, weights, strict=True):
        (model.loss(*part) * (w / sum(weights))).backward()
    for n, p in model.named_parameters():
        torch.testing.assert_close(p.grad, whole[n], atol=1e-6, rtol=1e-5)
