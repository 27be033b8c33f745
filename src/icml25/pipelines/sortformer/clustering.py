"""Classical clustering diarizer: the non-neural reference point.

energy VAD (25 ms frames, speech if above ``vad_db`` below the loudest frame) -> 1.5 s windows with
0.75 s hop over the recording -> embedding = mean and std of MFCC(20) and their deltas over the
window's speech frames -> cosine agglomerative clustering (scikit-learn, average linkage) with a
distance threshold tuned on validation, or an oracle number of clusters -> each speech frame
takes the label of the nearest window centre. One speaker per frame: no overlap.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy.fft import dct
from sklearn.cluster import AgglomerativeClustering

from icml25.pipelines.sortformer.features import SAMPLE_RATE, mel_filterbank, prepare_audio


def mfcc(x: np.ndarray, n_mfcc: int = 20, n_mels: int = 40) -> tuple[np.ndarray, np.ndarray]:
    """(frames, n_mfcc) MFCC at a 10 ms hop and the frames' log energies (dB)."""
    wav = torch.from_numpy(prepare_audio(x, SAMPLE_RATE))
    spec = torch.stft(wav, n_fft=512, hop_length=160, win_length=400,
                      window=torch.hann_window(400), center=True, return_complex=True)
    power = (spec.abs() ** 2).T
    logmel = torch.log(power @ mel_filterbank(n_mels) + 1e-8).numpy()
    energy_db = 10 * np.log10(power.sum(dim=1).numpy() + 1e-10)
    return dct(logmel, type=2, norm="ortho", axis=1)[:, :n_mfcc], energy_db


def cluster_diarize(x: np.ndarray, frame_s: float = 0.08, threshold: float | None = 0.5,
                    n_clusters: int | None = None, vad_db: float = 30.0, window_s: float = 1.5,
                    hop_s: float = 0.75, n_mfcc: int = 20) -> np.ndarray:
    """(frames at ``frame_s``, n_clusters) 0/1 activity, columns in order of first activity."""
    feats, energy = mfcc(x, n_mfcc)
    deltas = np.gradient(feats, axis=0)
    speech = energy >= energy.max() - vad_db
    n_out = round(len(x) / SAMPLE_RATE / frame_s)
    win, hop = int(window_s / 0.01), int(hop_s / 0.01)
    starts = list(range(0, max(len(feats) - win, 0) + 1, hop))
    emb, centres = [], []
    for s in starts:
        m = speech[s:s + win]
        if m.sum() < 10:
            continue
        f = np.concatenate([feats[s:s + win][m], deltas[s:s + win][m]], axis=1)
        emb.append(np.concatenate([f.mean(0), f.std(0)]))
        centres.append(s + win / 2)
    if not emb:
        return np.zeros((n_out, 1), dtype=np.float32)
    emb = np.asarray(emb)
    emb = (emb - emb.mean(0)) / (emb.std(0) + 1e-6) if len(emb) > 1 else emb
    zero = np.linalg.norm(emb, axis=1) < 1e-9  # a window at the mean: no cosine direction
    if len(emb) == 1 or zero.all():
        labels = np.zeros(len(emb), dtype=int)
    elif zero.any():  # such windows join the cluster of their nearest window in time
        labels = np.zeros(len(emb), dtype=int)
        idx = np.flatnonzero(~zero)
        sub = cluster_diarize_labels(emb[idx], threshold, n_clusters)
        labels[idx] = sub
        labels[zero] = sub[np.abs(np.flatnonzero(zero)[:, None] - idx[None]).argmin(axis=1)]
    elif n_clusters is not None:
        labels = AgglomerativeClustering(n_clusters=min(n_clusters, len(emb)), metric="cosine",
                                         linkage="average").fit_predict(emb)
    else:
        labels = AgglomerativeClustering(n_clusters=None, distance_threshold=threshold,
                                         metric="cosine", linkage="average").fit_predict(emb)
    labels = np.unique(labels, return_inverse=True)[1]
    centres = np.asarray(centres)
    frame_idx = np.flatnonzero(speech)
    nearest = labels[np.abs(frame_idx[:, None] - centres[None]).argmin(axis=1)]
    fine = np.full(len(feats), -1)
    fine[frame_idx] = nearest
    sub = round(frame_s / 0.01)
    n_lab = labels.max() + 1
    out = np.zeros((n_out, n_lab), dtype=np.float32)
    for k in range(n_out):
        chunk = fine[k * sub:(k + 1) * sub]
        chunk = chunk[chunk >= 0]
        if chunk.size * 2 > sub:
            out[k, np.bincount(chunk, minlength=n_lab).argmax()] = 1.0
    first = [np.flatnonzero(out[:, j])[0] if out[:, j].any() else n_out for j in range(n_lab)]
    return out[:, np.argsort(first, kind="stable")]


def cluster_diarize_labels(emb: np.ndarray, threshold: float | None, n_clusters: int | None
                           ) -> np.ndarray:
    """Cosine average-linkage labels of non-zero embeddings (a single one is cluster 0)."""
    if len(emb) == 1:
        return np.zeros(1, dtype=int)
    if n_clusters is not None:
        return AgglomerativeClustering(n_clusters=min(n_clusters, len(emb)), metric="cosine",
                                       linkage="average").fit_predict(emb)
    return AgglomerativeClustering(n_clusters=None, distance_threshold=threshold,
                                   metric="cosine", linkage="average").fit_predict(emb)
