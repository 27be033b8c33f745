"""Multi-speaker ASR with speaker supervision through sinusoidal kernels.

See ``docs/papers/sortformer.md``.

- Word mixtures (LibriSpeechMix style): 1-3 speakers, each says 2-5 isolated words with 0.1-0.3 s
  pauses; speaker j starts U(0.5, 2.0) s after speaker j-1 began (overlap allowed).
- Sorted Serialized Transcript (SST), word level: words sorted by start time, each preceded by
  ``<spkK>`` where K is the speaker's arrival index.
- Kernels: ``Gamma[k, z] = sin(2 pi (k+1) (z+1) / M)`` (k = 0..K-1, z = 0..M-1; rows orthogonal,
  ``Gamma Gamma^T = (M/2) I``). Injection ``A~ = A / ||A||_2 + kernel_scale * Gamma^T P`` with the
  norm per frame over the M dims (the project's default; the paper does not state the axis);
  ``unit_rows`` scales the
  rows to unit norm (ablation).
- AED: log-mel -> conv x8 -> + positions -> Transformer encoder (A) -> injection -> 2-layer
  Transformer decoder over the token vocabulary, token CE with label smoothing, greedy decoding.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn

from icml25.core.training import TrainLoopConfig, TrainResult, train
from icml25.pipelines.sortformer.diarizer_training import OptimConfig, inverse_sqrt
from icml25.pipelines.sortformer.model import ConvSubsampling, sinusoidal_positions
from icml25.pipelines.sortformer.rttm import Segment, segments_to_frames
from icml25.pipelines.sortformer.speaker_bank import ASR_WORDS

SAMPLE_RATE = 16000
SPECIALS = ("<pad>", "<bos>", "<eos>")


def vocabulary(n_speakers: int = 4) -> list[str]:
    return [*SPECIALS, *(f"<spk{k}>" for k in range(n_speakers)), *ASR_WORDS]


def speaker_kernels(n_speakers: int, dim: int, unit_rows: bool = False) -> torch.Tensor:
    """Gamma (K, M) with ``Gamma[k, z] = sin(2 pi (k+1)(z+1)/M)``."""
    if dim < 2 * n_speakers + 1:
        raise ValueError(f"kernel dim {dim} too small for {n_speakers} orthogonal sinusoids")
    k = torch.arange(1, n_speakers + 1, dtype=torch.float64)[:, None]
    z = torch.arange(1, dim + 1, dtype=torch.float64)[None]
    g = torch.sin(2 * math.pi * k * z / dim)
    if unit_rows:
        g = g / g.norm(dim=1, keepdim=True)
    return g.float()


def inject(a: torch.Tensor, p: torch.Tensor | None, gamma: torch.Tensor, scale: float = 1.0
           ) -> torch.Tensor:
    """``A / ||A|| + scale * Gamma^T P`` with A (B, T, M), P (B, T, K); P=None means no kernels."""
    out = a / a.norm(dim=-1, keepdim=True).clamp_min(1e-6)
    if p is None:
        return out
    return out + scale * (p @ gamma.to(p))


def build_mixtures(utterances: pd.DataFrame, speakers: Sequence[str], n_mixtures: int,
                   count_weights: Sequence[float], seed: int, split: str,
                   words_range: tuple[int, int] = (2, 5),
                   pause_range: tuple[float, float] = (0.1, 0.3),
                   delay_range: tuple[float, float] = (0.5, 2.0)) -> pd.DataFrame:
    """Mixture metadata: one row per word (mixture, split, seed, n_speakers, speaker, word,
    utterance, start, end, duration_s)."""
    words = utterances[utterances["kind"] == "word"].set_index("utterance")
    weights = np.asarray(count_weights, float)
    weights = weights[: min(len(weights), len(speakers))]
    weights = weights / weights.sum()
    rows = []
    for i in range(n_mixtures):
        mseed = int(np.random.SeedSequence([seed, 99, i]).generate_state(1)[0])
        rng = np.random.default_rng(mseed)
        n = int(rng.choice(np.arange(1, len(weights) + 1), p=weights))
        chosen = [str(s) for s in rng.choice(list(speakers), size=n, replace=False)]
        begin, mix_rows = 0.0, []
        for j, spk in enumerate(chosen):
            if j:
                begin += float(rng.uniform(*delay_range))
            t = begin
            for _ in range(int(rng.integers(words_range[0], words_range[1] + 1))):
                w = str(rng.choice(ASR_WORDS))
                utt = f"{spk}_w_{w}"
                if utt not in words.index:
                    raise ValueError(f"word {w!r} of speaker {spk} is not in the speaker bank")
                dur = words.loc[utt, "n_samples"] / SAMPLE_RATE
                mix_rows.append({"speaker": spk, "word": w, "utterance": utt,
                                 "start": round(t, 4), "end": round(t + dur, 4)})
                t += dur + float(rng.uniform(*pause_range))
        length = max(r["end"] for r in mix_rows) + 0.2
        rows += [{"mixture": f"{split}_mix{i:04d}", "split": split, "seed": mseed,
                  "n_speakers": n, "duration_s": round(length, 2), **r} for r in mix_rows]
    return pd.DataFrame(rows)


def render_mixture(rows: pd.DataFrame, audio: Mapping[str, np.ndarray],
                   snr_db: float = 30.0) -> np.ndarray:
    first = rows.iloc[0]
    n = round(float(first["duration_s"]) * SAMPLE_RATE)
    mix = np.zeros(n)
    for r in rows.itertuples():
        a = round(r.start * SAMPLE_RATE)
        x = audio[r.utterance][: n - a]
        mix[a:a + x.size] += x
    rng = np.random.default_rng(int(first["seed"]))
    noise = rng.standard_normal(n) * np.sqrt((mix ** 2).mean() / 10 ** (snr_db / 10))
    return (mix + noise).astype(np.float32)


def arrival_speakers(rows: pd.DataFrame) -> list[str]:
    first = rows.groupby("speaker")["start"].min().sort_values(kind="stable")
    return list(first.index)


def sst_tokens(rows: pd.DataFrame) -> list[str]:
    """Word-level SST: ``<spkK> word`` for every word in start-time order."""
    order = arrival_speakers(rows)
    out = []
    for r in rows.sort_values(["start", "speaker"], kind="stable").itertuples():
        out += [f"<spk{order.index(r.speaker)}>", r.word]
    return out


def mixture_labels(rows: pd.DataFrame, n_frames: int, n_speakers: int = 4) -> np.ndarray:
    segs = [Segment(float(r.start), float(r.end - r.start), str(r.speaker))
            for r in rows.itertuples()]
    return segments_to_frames(segs, n_frames, n_speakers)


def tokens_to_transcripts(tokens: Sequence[str]) -> dict[str, str]:
    """SST tokens -> ``{spkK: words}`` (a word with no speaker tag goes to ``spk0``)."""
    out: dict[str, list[str]] = {}
    current = "<spk0>"
    for t in tokens:
        if t.startswith("<spk"):
            current = t
        elif t not in SPECIALS:
            out.setdefault(current.strip("<>"), []).append(t)
    return {k: " ".join(v) for k, v in out.items()}


def reference_transcripts(rows: pd.DataFrame) -> dict[str, str]:
    return {s: " ".join(g.sort_values("start")["word"]) for s, g in rows.groupby("speaker")}


@dataclass(frozen=True)
class AsrConfig:
    n_mels: int = 40
    conv_channels: int = 8
    d_model: int = 96
    enc_layers: int = 2
    dec_layers: int = 2
    n_heads: int = 4
    d_ff: int = 256
    dropout: float = 0.1
    n_speakers: int = 4
    kernel_scale: float = 1.0
    unit_rows: bool = False
    inject_at: str = "encoder_output"  # or pre_encoder
    label_smoothing: float = 0.1
    max_tokens: int = 48

    def to_dict(self) -> dict:
        return asdict(self)


class SpeakerAwareAED(nn.Module):
    """Attention encoder-decoder whose encoder states carry the diarizer's speaker posteriors."""

    def __init__(self, cfg: AsrConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.vocab = vocabulary(cfg.n_speakers)
        d = cfg.d_model
        self.front = ConvSubsampling(cfg.n_mels, cfg.conv_channels, d)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d, cfg.n_heads, cfg.d_ff, cfg.dropout, batch_first=True,
                                       norm_first=True), cfg.enc_layers, enable_nested_tensor=False)
        self.embed = nn.Embedding(len(self.vocab), d)
        self.decoder = nn.TransformerDecoder(
            nn.TransformerDecoderLayer(d, cfg.n_heads, cfg.d_ff, cfg.dropout, batch_first=True,
                                       norm_first=True), cfg.dec_layers)
        self.out = nn.Linear(d, len(self.vocab))
        self.register_buffer("gamma", speaker_kernels(cfg.n_speakers, d, cfg.unit_rows))

    def encode(self, feats: torch.Tensor, lengths: torch.Tensor, p: torch.Tensor | None
               ) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.front(feats)[:, : int(lengths.max())]
        pad = torch.arange(h.shape[1], device=h.device)[None] >= lengths[:, None]
        if p is not None:
            p = p[:, : h.shape[1]]
        if self.cfg.inject_at == "pre_encoder":
            h = inject(h, p, self.gamma, self.cfg.kernel_scale)
            h = h + sinusoidal_positions(h.shape[1], h.shape[2]).to(h)
            return self.encoder(h, src_key_padding_mask=pad), pad
        h = h + sinusoidal_positions(h.shape[1], h.shape[2]).to(h)
        a = self.encoder(h, src_key_padding_mask=pad)
        return inject(a, p, self.gamma, self.cfg.kernel_scale), pad

    def decode_logits(self, memory, pad, tokens):
        t = tokens.shape[1]
        x = self.embed(tokens) + sinusoidal_positions(t, self.cfg.d_model).to(memory)
        causal = torch.triu(torch.full((t, t), float("-inf"), device=x.device), diagonal=1)
        h = self.decoder(x, memory, tgt_mask=causal, tgt_key_padding_mask=tokens == 0,
                         memory_key_padding_mask=pad)
        return self.out(h)

    def loss(self, feats, lengths, p, tokens) -> torch.Tensor:
        memory, pad = self.encode(feats, lengths, p)
        logits = self.decode_logits(memory, pad, tokens[:, :-1])
        return nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                           tokens[:, 1:].reshape(-1), ignore_index=0,
                                           label_smoothing=self.cfg.label_smoothing)

    @torch.no_grad()
    def greedy(self, feats, lengths, p) -> list[list[str]]:
        memory, pad = self.encode(feats, lengths, p)
        b = feats.shape[0]
        tokens = torch.full((b, 1), 1, dtype=torch.long, device=feats.device)
        done = torch.zeros(b, dtype=torch.bool, device=feats.device)
        for _ in range(self.cfg.max_tokens):
            nxt = self.decode_logits(memory, pad, tokens)[:, -1].argmax(-1)
            nxt = torch.where(done, torch.zeros_like(nxt), nxt)
            tokens = torch.cat([tokens, nxt[:, None]], dim=1)
            done |= nxt == 2
            if bool(done.all()):
                break
        out = []
        for row in tokens[:, 1:].tolist():
            words = []
            for t in row:
                if t in (0, 2):
                    break
                words.append(self.vocab[t])
            out.append(words)
        return out


def _batch(feats, probs, token_lists, vocab_index, idx):
    tf = max(feats[i].shape[0] for i in idx)
    n_frames = [probs[i].shape[0] for i in idx]
    x = torch.zeros(len(idx), tf, feats[idx[0]].shape[1])
    p = torch.zeros(len(idx), max(n_frames), probs[idx[0]].shape[1])
    for j, i in enumerate(idx):
        x[j, : feats[i].shape[0]] = torch.from_numpy(feats[i])
        p[j, : n_frames[j]] = torch.from_numpy(np.asarray(probs[i], np.float32))
    tokens = None
    if token_lists is not None:
        seqs = [[1, *(vocab_index[t] for t in token_lists[i]), 2] for i in idx]
        tokens = torch.zeros(len(idx), max(map(len, seqs)), dtype=torch.long)
        for j, s in enumerate(seqs):
            tokens[j, : len(s)] = torch.tensor(s)
    return x, torch.tensor(n_frames), p, tokens


def train_asr(feats: Sequence[np.ndarray], probs: Sequence[np.ndarray] | None,
              tokens: Sequence[Sequence[str]], cfg: AsrConfig, optim: OptimConfig, seed: int,
              progress: bool = True, desc: str = "asr") -> tuple[SpeakerAwareAED, TrainResult]:
    """Train the AED; ``probs=None`` trains without kernels (P = 0 is not injected at all)."""
    torch.manual_seed(seed)
    model = SpeakerAwareAED(cfg)
    index = {t: i for i, t in enumerate(model.vocab)}
    n = len(feats)
    use_p = probs is not None
    probs_ = probs if use_p else [np.zeros((_frames(f), cfg.n_speakers), np.float32)
                                  for f in feats]
    per_epoch = max(n // optim.batch_size, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=optim.lr, betas=optim.betas,
                            weight_decay=optim.weight_decay)

    def batch_fn(step):
        epoch, i = divmod(step, per_epoch)
        perm = np.random.default_rng([seed, epoch]).permutation(n)
        return _batch(feats, probs_, tokens, index,
                      list(perm[i * optim.batch_size:(i + 1) * optim.batch_size]))

    def loss_fn(m, batch):
        x, lengths, p, tok = batch
        return m.loss(x, lengths, p if use_p else None, tok)

    cfg_loop = TrainLoopConfig(steps=per_epoch * optim.epochs, grad_clip=optim.grad_clip,
                               log_every=per_epoch, progress=progress, desc=desc)
    result = train(model, opt, batch_fn, loss_fn, cfg_loop, scheduler=inverse_sqrt(opt, optim))
    model.eval()
    return model, result


def _frames(f: np.ndarray) -> int:
    n = f.shape[0]
    for _ in range(3):
        n = (n - 1) // 2 + 1
    return n


def transcribe(model: SpeakerAwareAED, feats: Sequence[np.ndarray],
               probs: Sequence[np.ndarray] | None, batch_size: int = 32) -> list[list[str]]:
    use_p = probs is not None
    probs_ = probs if use_p else [np.zeros((_frames(f), model.cfg.n_speakers), np.float32)
                                  for f in feats]
    out = []
    for s in range(0, len(feats), batch_size):
        idx = list(range(s, min(s + batch_size, len(feats))))
        x, lengths, p, _ = _batch(feats, probs_, None, {}, idx)
        out += model.greedy(x, lengths, p if use_p else None)
    return out
