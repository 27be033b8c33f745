"""Physical symmetry checks of a trained encoder on held-out test items (``docs/papers/acorn.md``,
"Symmetry metrics").

Each check feeds a transformed copy of a test clip and compares the new prediction with what
the physics says it must be:

- microphone swap (DoA): the channels exchanged mirror the scene, so the TDoA changes sign;
  ``doa_swap_error`` = mean |f(swap x) + f(x)|, ``doa_swap_side_flip`` = share of items whose
  predicted side flips.
- time reversal (DoA): a reversed pair has the negated TDoA; ``doa_reverse_error`` =
  mean |f(reverse x) + f(x)|. (Time reversal is *not* a sign flip of the Doppler shift: each
  partial keeps its frequency, only the loudness trend reverses, so ``doppler_reverse_change`` =
  mean |f(reverse x) − f(x)| should be 0.)
- pure delay of the recording (DoA): both channels delayed by 37 samples, zero-filled: the
  direction must not move; ``doa_delay_change`` = mean |f(delay x) − f(x)|.
- inter-channel delay (DoA): channel 2 delayed by δ = ±2 samples, zero-filled, moves the TDoA
  by exactly δ; ``doa_channel_delay_error`` = mean |f(x_δ) − f(x) − δ| over the items whose
  |τ + δ| stays inside the array's range.
- approaching ↔ receding (Doppler): every test Doppler scene re-rendered with the opposite
  radial speed (split ``mirror``, same seed, so the same source and noise); the label's sign
  flips; ``doppler_mirror_sign_flip`` = share of pairs with opposite predicted signs,
  ``doppler_mirror_error`` = mean |(f(x) + f(mirror x)) − (y + y_mirror)|,
  ``doppler_sign_acc_approaching`` / ``_receding`` = sign accuracy on the test ∪ mirror items
  whose true shift is positive / negative. A regressor whose error is about a point cannot
  tell the sign of a shift smaller than that, so the same two checks are also reported on the
  *resolved* shifts, |Δf| >= :data:`RESOLVED_SHIFT` points (about 7 m/s):
  ``doppler_mirror_sign_flip_resolved`` and ``doppler_sign_acc_resolved``.
- unknown source type (Doppler): every test item fed with the "unknown source type" token in
  place of its catalogue name; ``doppler_unknown_source_mae_f``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

#: prediction splits of the transformed test clips (same item ids as the test split)
DELAY_SAMPLES = 37
CHANNEL_DELAYS = (2, -2)
SPLITS = ("sym_swap", "sym_reverse", "sym_delay", *(f"sym_icd{d:+d}" for d in CHANNEL_DELAYS),
          "sym_unknown")
#: metrics where higher is better
HIGHER = ("doa_swap_side_flip", "doppler_mirror_sign_flip", "doppler_sign_acc_approaching",
          "doppler_sign_acc_receding", "doppler_mirror_sign_flip_resolved",
          "doppler_sign_acc_resolved")
#: the smallest |Doppler shift| (percentage points) the *_resolved sign checks count
RESOLVED_SHIFT = 2.0


def delay(audio: torch.Tensor, samples: int, channel: int | None = None) -> torch.Tensor:
    """``audio`` (n, C, N) delayed by ``samples`` (negative: advanced), zero-filled, on every
    channel or on ``channel`` only."""
    out = audio.clone()
    chans = range(audio.shape[1]) if channel is None else [channel]
    for c in chans:
        x = audio[:, c]
        y = torch.zeros_like(x)
        if samples > 0:
            y[:, samples:] = x[:, :-samples]
        elif samples < 0:
            y[:, :samples] = x[:, -samples:]
        else:
            y = x
        out[:, c] = y
    return out


def transformed_inputs(task: str, audio: torch.Tensor) -> dict[str, torch.Tensor]:
    """{split: transformed clips} of one task's test clips (n, 2, N)."""
    if task == "doa":
        out = {"sym_swap": audio.flip(1), "sym_reverse": audio.flip(2),
               "sym_delay": delay(audio, DELAY_SAMPLES)}
        for d in CHANNEL_DELAYS:
            out[f"sym_icd{d:+d}"] = delay(audio, d, channel=1)
        return out
    if task == "doppler":
        return {"sym_reverse": audio.flip(2)}
    return {}


def _series(preds: pd.DataFrame, split: str, task: str) -> pd.Series:
    sub = preds[(preds["split"] == split) & (preds["task"] == task)]
    return pd.Series(sub["pred"].to_numpy(dtype=float), index=sub["item"].to_numpy())


def symmetry_metrics(meta: pd.DataFrame, preds: pd.DataFrame, max_tdoa: float
                     ) -> dict[str, float]:
    """The symmetry metrics (module docstring) of one variant and seed's predictions; a
    metric whose transformed predictions are absent is left out."""
    labels = meta.set_index("item")["label"]
    out: dict[str, float] = {}
    base = _series(preds, "test", "doa")
    if len(base):
        for split, name in (("sym_swap", "doa_swap_error"), ("sym_reverse", "doa_reverse_error")):
            t = _series(preds, split, "doa").reindex(base.index)
            if t.notna().all():
                out[name] = float(np.mean(np.abs(t + base)))
                if split == "sym_swap":
                    out["doa_swap_side_flip"] = float(np.mean((t > 0) != (base > 0)))
        t = _series(preds, "sym_delay", "doa").reindex(base.index)
        if t.notna().all():
            out["doa_delay_change"] = float(np.mean(np.abs(t - base)))
        errs = []
        true = labels.loc[base.index].to_numpy(dtype=float)
        for d in CHANNEL_DELAYS:
            t = _series(preds, f"sym_icd{d:+d}", "doa").reindex(base.index)
            ok = np.abs(true + d) <= max_tdoa
            if t.notna().all() and ok.any():
                errs.append(np.abs(t.to_numpy() - base.to_numpy() - d)[ok])
        if errs:
            out["doa_channel_delay_error"] = float(np.mean(np.concatenate(errs)))
    dop = _series(preds, "test", "doppler")
    if len(dop):
        t = _series(preds, "sym_reverse", "doppler").reindex(dop.index)
        if t.notna().all():
            out["doppler_reverse_change"] = float(np.mean(np.abs(t - dop)))
        t = _series(preds, "sym_unknown", "doppler").reindex(dop.index)
        if t.notna().all():
            out["doppler_unknown_source_mae_f"] = float(np.mean(np.abs(
                t.to_numpy() - labels.loc[dop.index].to_numpy(dtype=float))))
        mirror = meta[(meta["split"] == "mirror") & (meta["task"] == "doppler")]
        mir = _series(preds, "mirror", "doppler")
        if len(mirror) and len(mir):
            pair = mirror.set_index("item")["mirror_of"].astype(int)
            m_series = mir.reindex(pair.index)
            if m_series.notna().all():
                m = m_series.to_numpy()
                f_x = dop.reindex(pair.to_numpy()).to_numpy()
                y_x = labels.loc[pair.to_numpy()].to_numpy(dtype=float)
                y_m = labels.loc[pair.index].to_numpy(dtype=float)
                flips = np.sign(f_x) * np.sign(m) < 0
                out["doppler_mirror_sign_flip"] = float(np.mean(flips))
                out["doppler_mirror_error"] = float(np.mean(np.abs((f_x + m) - (y_x + y_m))))
                pred = np.concatenate([f_x, m])
                true = np.concatenate([y_x, y_m])
                for name, sel in (("approaching", true > 0), ("receding", true < 0),
                                  ("resolved", np.abs(true) >= RESOLVED_SHIFT)):
                    if sel.any():
                        out[f"doppler_sign_acc_{name}"] = float(np.mean(
                            np.sign(pred[sel]) == np.sign(true[sel])))
                big = np.abs(y_x) >= RESOLVED_SHIFT
                if big.any():
                    out["doppler_mirror_sign_flip_resolved"] = float(np.mean(flips[big]))
    return out
