"""The ACORN audio encoder, small version (paper §4, Figure 2; ``docs/papers/acorn.md``).

The paper's encoder feeds three STFT maps per frame — magnitude M = |X| and the phase as
S = sin∠X, C = cos∠X (sin/cos avoid the ±π wrap) — through separate Conv1d branches, fuses
them, and runs Whisper-style Transformer layers. Why phase matters: a 1-sample inter-mic delay
is a per-bin phase difference of 2πk/254 that is nearly absent from |X|, and a Doppler shift
Δf changes the frame-to-frame phase advance by 2π·Δf·hop/fs. ``use_phase=False`` is the
identical network with the two phase branches removed (the magnitude-only control standing in
for the Whisper encoder).

The readout, in place of the LLM: a learned task token and a source token (the Doppler catalogue
entry named in the question; token 0 "no named source" for the other tasks, the last token
"unknown source type" for any source outside the catalogue, trained by dropping the name of a
fraction of the Doppler training items) are prepended to the audio tokens; the output at the
task token feeds one small MLP head per task.

Microphone-swap antisymmetry (``swap_antisymmetric``, our addition): swapping the two channels
mirrors the scene about the array's broadside plane, so the TDoA changes sign exactly. The DoA
head is built antisymmetric, f(x) = (g(x) − g(swap x))/2 for the TDoA output and the left−right
logit difference, so f(swap x) = −f(x) holds by construction (up to float rounding) in eval mode.

Delay-respecting DoA readout (``doa_head="lag"``, our addition; :mod:`.lag_head`): instead of the
task token, the TDoA is read from a learned generalised cross-correlation of the two channels
with a soft-argmax over lags, which is invariant to a common delay of both channels and moves by
exactly δ when channel 2 is delayed by δ (to float rounding, for delays that drop no sample and a
peak inside the lag window). It reads
the clip's phase, so only the phase encoder has it; the magnitude-only control keeps the
token readout. The left/right logit is a learned positive multiple of that TDoA, and the swap
antisymmetrisation above is applied on top (it keeps both delay properties). In eval mode the
estimate is clamped to the array's range ±``max_tdoa``. With ``doa_token_aux`` the token DoA
head is kept and trained as an auxiliary task (``readout="token"``), so the DoA batches still
train the encoder; the answer is the lag head's.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
from torch import nn

from icml25.pipelines.acorn.lag_head import LagDoAHead

N_FFT = 254
HOP = 160
TASK_OUTPUTS = {"los": 2, "multipath": 3, "doppler": 1, "doa": 3, "range": 1}
TASK_IDS = {task: i for i, task in enumerate(TASK_OUTPUTS)}


@dataclass(frozen=True)
class EncoderConfig:
    """Geometry of :class:`AcornModel` (``acorn.model`` parameters)."""

    d: int = 96
    layers: int = 4
    heads: int = 4
    use_phase: bool = True
    n_ch: int = 2
    mc_mode: str = "stack"
    phase: str = "relative"
    dropout: float = 0.1
    n_sources: int = 8  # "no named source" + catalogue entries + "unknown source type"
    swap_antisymmetric: bool = True
    doa_head: str = "token"  # "token": MLP on the task token; "lag": lag_head.LagDoAHead
    lag_bands: int = 8
    lag_channels: int = 16
    lag_kernel: int = 9
    lag_temperature: float = 50.0
    lag_window: int = 16
    max_tdoa: float | None = None  # eval-time clamp of the lag head's TDoA (samples)
    doa_token_aux: bool = False  # lag head: also train the token DoA head (auxiliary loss)

    def to_dict(self) -> dict:
        return asdict(self)


def stft_features(x: torch.Tensor, use_phase: bool = True, dither: float = 1e-5,
                  phase: str = "relative") -> torch.Tensor:
    """(B, C, N) audio → (B, K, C, 128, T) maps, K = 3 (log1p|X|, sin φ, cos φ) or 1.

    One gain for all channels keeps level cues: x / (max_c rms(x_c) + 1e-8) · 0.1. The dither
    (a fixed pseudo-random sequence, so evaluation is deterministic) makes the phase of
    otherwise empty bins well defined; a bin with |X| = 0 exactly gets angle 0 (sin 0, cos 1).

    ``phase="absolute"``: φ_c = ∠X_c for every channel (the paper's per-channel phase maps).
    ``phase="relative"``: the reference channel (mic 1) keeps its absolute phase φ_0 = ∠X_0
    (the frame-to-frame phase advance that carries a Doppler shift), every other channel carries
    its inter-channel phase difference φ_c = ∠X_c − ∠X_0 (IPD, the standard input of learned
    direction-of-arrival estimators). sin/cos of a difference are products of the absolute maps
    (sin(a − b) = sin a·cos b − cos a·sin b), so both options hold the same information in the
    same number of maps; the relative one hands the delay to the first (linear) convolution
    directly, a 1-sample TDoA being the per-bin pattern cos(2πk/254), sin(2πk/254).
    """
    if x.dim() != 3:
        raise ValueError(f"audio must be (batch, channels, samples), got shape {tuple(x.shape)}")
    if phase not in ("absolute", "relative"):
        raise ValueError(f"phase must be 'absolute' or 'relative', got {phase!r}")
    rms = x.pow(2).mean(dim=-1).sqrt().amax(dim=1, keepdim=True)
    x = x / (rms.unsqueeze(-1) + 1e-8) * 0.1
    if dither:
        gen = torch.Generator().manual_seed(0)
        x = x + dither * torch.randn(x.shape[-1], generator=gen).to(x)
    b, c, n = x.shape
    window = torch.hann_window(N_FFT, device=x.device, dtype=x.dtype)
    spec = torch.stft(x.reshape(b * c, n), n_fft=N_FFT, hop_length=HOP, win_length=N_FFT,
                      window=window, center=True, return_complex=True)
    spec = spec.reshape(b, c, spec.shape[-2], spec.shape[-1])
    mag = spec.abs()
    maps = [torch.log1p(mag)]
    if use_phase:
        zero = mag == 0
        angle = torch.where(zero, torch.zeros_like(mag), torch.angle(spec))
        if phase == "relative" and c > 1:
            angle = torch.cat([angle[:, :1], angle[:, 1:] - angle[:, :1]], dim=1)
        maps += [torch.sin(angle), torch.cos(angle)]
    return torch.stack(maps, dim=1)


def sinusoidal_positions(n: int, d: int, device=None) -> torch.Tensor:
    """Whisper's sinusoidal position table (n, d)."""
    half = d // 2
    inv = torch.exp(-math.log(10000.0) * torch.arange(half, device=device) / max(half - 1, 1))
    ang = torch.arange(n, device=device)[:, None] * inv[None, :]
    pos = torch.cat([torch.sin(ang), torch.cos(ang)], dim=1)
    return nn.functional.pad(pos, (0, d - pos.shape[1]))


class AcornEncoder(nn.Module):
    """Magnitude(+phase) STFT encoder: per-map Conv1d branch + GELU, fusion convs (the second
    with stride 2), sinusoidal positions, pre-LN Transformer.

    ``mc_mode="stack"``: channels stacked on the feature axis (each branch's first conv sees
    C·128 inputs). ``mc_mode="tokens"``: a shared per-channel front end plus a learned channel
    embedding, the tokens of all channels interleaved per frame.
    """

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        if cfg.mc_mode not in ("stack", "tokens"):
            raise ValueError(f"mc_mode must be 'stack' or 'tokens', got {cfg.mc_mode!r}")
        if cfg.phase not in ("absolute", "relative"):
            raise ValueError(f"phase must be 'absolute' or 'relative', got {cfg.phase!r}")
        self.cfg = cfg
        k = 3 if cfg.use_phase else 1
        bins = N_FFT // 2 + 1
        fan_in = cfg.n_ch * bins if cfg.mc_mode == "stack" else bins
        self.branches = nn.ModuleList(nn.Conv1d(fan_in, cfg.d, 3, padding=1) for _ in range(k))
        self.fuse = nn.Conv1d(k * cfg.d, cfg.d, 3, padding=1)
        self.down = nn.Conv1d(cfg.d, cfg.d, 3, stride=2, padding=1)
        if cfg.mc_mode == "tokens":
            self.channel_embedding = nn.Parameter(torch.zeros(cfg.n_ch, cfg.d))
        layer = nn.TransformerEncoderLayer(cfg.d, cfg.heads, 4 * cfg.d, cfg.dropout,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.transformer = nn.TransformerEncoder(layer, cfg.layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(cfg.d)

    def front_end(self, feats: torch.Tensor) -> torch.Tensor:
        """(B, K, C, F, T) maps → (B, T', d) audio tokens before the Transformer."""
        b, k, c, f, t = feats.shape
        act = nn.functional.gelu
        if self.cfg.mc_mode == "stack":
            h = torch.cat([act(conv(feats[:, i].reshape(b, c * f, t)))
                           for i, conv in enumerate(self.branches)], dim=1)
            h = act(self.down(act(self.fuse(h))))
            return h.transpose(1, 2)
        per = feats.permute(0, 2, 1, 3, 4).reshape(b * c, k, f, t)
        h = torch.cat([act(conv(per[:, i])) for i, conv in enumerate(self.branches)], dim=1)
        h = act(self.down(act(self.fuse(h)))).transpose(1, 2)  # (B·C, T', d)
        h = h.reshape(b, c, h.shape[1], -1) + self.channel_embedding[None, :, None, :]
        return h.transpose(1, 2).reshape(b, -1, h.shape[-1])  # frame-major: channels interleaved

    def forward(self, audio: torch.Tensor, prefix: torch.Tensor | None = None) -> torch.Tensor:
        feats = stft_features(audio, self.cfg.use_phase, phase=self.cfg.phase)
        h = self.front_end(feats)
        h = h + sinusoidal_positions(h.shape[1], h.shape[2], h.device).to(h)
        if prefix is not None:
            h = torch.cat([prefix, h], dim=1)
        return self.norm(self.transformer(h))


class AcornModel(nn.Module):
    """Encoder + question conditioning (task token, source token) + per-task heads."""

    def __init__(self, cfg: EncoderConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = AcornEncoder(cfg)
        self.task_embedding = nn.Embedding(len(TASK_OUTPUTS), cfg.d)
        self.source_embedding = nn.Embedding(cfg.n_sources, cfg.d)
        if cfg.doa_head not in ("token", "lag"):
            raise ValueError(f"doa_head must be 'token' or 'lag', got {cfg.doa_head!r}")
        if cfg.doa_head == "lag" and (not cfg.use_phase or cfg.n_ch != 2):
            raise ValueError("doa_head='lag' reads the inter-channel phase of a two-microphone "
                             "clip; the magnitude-only encoder (use_phase=False) or another "
                             f"channel count (n_ch={cfg.n_ch}) must use doa_head='token'")
        self.heads = nn.ModuleDict({
            task: nn.Sequential(nn.Linear(cfg.d, cfg.d), nn.GELU(), nn.Linear(cfg.d, n))
            for task, n in TASK_OUTPUTS.items()
            if not (task == "doa" and cfg.doa_head == "lag" and not cfg.doa_token_aux)})
        self.lag_head = None
        if cfg.doa_head == "lag":
            self.lag_head = LagDoAHead(bands=cfg.lag_bands, channels=cfg.lag_channels,
                                       kernel=cfg.lag_kernel, temperature=cfg.lag_temperature,
                                       window=cfg.lag_window)
            self.side_scale = nn.Parameter(torch.tensor(0.5413))  # softplus → 1 logit/sample

    @property
    def unknown_source(self) -> int:
        """The token of a source type outside the catalogue (the last one)."""
        return self.cfg.n_sources - 1

    def raw(self, audio: torch.Tensor, task: str, source: torch.Tensor,
            readout: str = "answer") -> torch.Tensor:
        """The task head's output without the built-in symmetry; ``readout="token"`` gives the
        token DoA head where the lag head answers (the auxiliary readout)."""
        if task == "doa" and self.lag_head is not None and readout != "token":
            tau = self.lag_head(audio)
            side = nn.functional.softplus(self.side_scale) * tau
            return torch.stack([tau, -0.5 * side, 0.5 * side], dim=1)
        b = audio.shape[0]
        task_tok = self.task_embedding(torch.full((b,), TASK_IDS[task], dtype=torch.long,
                                                  device=audio.device))
        prefix = torch.stack([task_tok, self.source_embedding(source)], dim=1)
        tokens = self.encoder(audio, prefix)
        return self.heads[task](tokens[:, 0])

    def forward(self, audio: torch.Tensor, task: str, source: torch.Tensor,
                readout: str = "answer") -> torch.Tensor:
        if task != "doa":
            return self.raw(audio, task, source)
        if readout == "token" and "doa" not in self.heads:
            raise ValueError("this model has no token DoA head (doa_head='lag' without "
                             "doa_token_aux)")
        clamp = self._clamped if readout != "token" else (lambda out: out)
        if not self.cfg.swap_antisymmetric or audio.shape[1] != 2:
            return clamp(self.raw(audio, task, source, readout))
        b = audio.shape[0]
        both = self.raw(torch.cat([audio, audio.flip(1)]), task, torch.cat([source, source]),
                        readout)
        g, g_swap = both[:b], both[b:]
        tdoa = 0.5 * (g[:, 0] - g_swap[:, 0])
        side = 0.5 * ((g[:, 2] - g[:, 1]) - (g_swap[:, 2] - g_swap[:, 1]))
        return clamp(torch.stack([tdoa, -0.5 * side, 0.5 * side], dim=1))

    def _clamped(self, out: torch.Tensor) -> torch.Tensor:
        """The lag head's TDoA clamped to the array's range ±max_tdoa at prediction time (its
        window is wider; the clamp is odd, so it keeps the swap antisymmetry, and it keeps the
        delay properties inside the range). Training sees the unclamped estimate, so an
        estimate beyond the range still has a gradient."""
        if self.lag_head is None or self.training or self.cfg.max_tdoa is None:
            return out
        m = float(self.cfg.max_tdoa)
        return torch.cat([out[:, :1].clamp(-m, m), out[:, 1:]], dim=1)


def count_parameters(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())
