"""AQA-PHY scene metadata and rendering (paper §3; ``docs/papers/acorn.md``, "Data").

A scene is one metadata row: the task, the physical parameters that set its label and a
per-item seed for everything else. :func:`render_item` turns a row into a multichannel clip
deterministically (same row ⇒ bit-identical audio), either with the component simulator of
:mod:`channels` or, for the transfer test set T2, with pyroomacoustics' image-source ShoeBox.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from icml25.pipelines.acorn import channels as ch
from icml25.pipelines.acorn.qa import answer, question
from icml25.pipelines.acorn.sources import TONAL_CATALOGUE, render_tonal

FS = ch.FS
C = ch.SPEED_OF_SOUND
CIR_SECONDS = 0.5
RANGE_EMIT_AT = 160  # the probe starts 10 ms into the clip
RANGE_LEAK_MAX_S = 0.0005


@dataclass(frozen=True)
class SceneConfig:
    """The physical ranges scenes are drawn from (``acorn.data`` parameters)."""

    clip_s: float = 0.25
    mic_spacing: float = 0.2
    n_mics: int = 2
    snr_db: tuple[float, float] = (5.0, 40.0)
    speed: tuple[float, float] = (-40.0, 40.0)
    los_range: tuple[float, float] = (0.5, 6.0)
    doa_range: tuple[float, float] = (1.0, 5.0)
    reflector: tuple[float, float] = (0.3, 5.0)
    drr_db: tuple[float, float] = (-5.0, 15.0)
    t60: tuple[float, float] = (0.2, 1.0)
    weak_t60: tuple[float, float] = (0.1, 0.35)
    strong_t60: tuple[float, float] = (0.6, 1.5)
    room_size: tuple[tuple[float, float], tuple[float, float], tuple[float, float]] = (
        (5.0, 12.0), (4.0, 10.0), (2.5, 4.0))

    @property
    def clip_n(self) -> int:
        return round(self.clip_s * FS)


# ------------------------------------------------------------------------- metadata
#: the closest a Doppler scene's source comes to either microphone while the clip is heard (m)
DOPPLER_MIN_RANGE = 2.0
#: the weak reverberant tail rendered before a Doppler clip's first sample (s; _render_doppler)
DOPPLER_TAIL_S = 0.1


def doppler_min_start_range(v: float, cfg: SceneConfig) -> float:
    """The smallest range ``d0`` at the clip's first sample for which a source moving at ``v``
    *and* at ``-v`` (the mirrored test scene) stays :data:`DOPPLER_MIN_RANGE` from either
    microphone at every receiver time ``t`` of the rendered clip, ``-DOPPLER_TAIL_S`` to the
    last sample. The emission-time model (``channels.render_moving_source``) gives the range
    heard at ``t`` as ``(d0 + v t) / (1 + v / c)``, linear in ``t``, so the two ends of the clip
    bound it. At the CPU default's 0.25-s clips this is under 12 m for every |v| <= 40 m/s
    (the drawn 12-30 m stand); at 4 s, an approaching source at 40 m/s covers 160 m."""
    t_first, t_last = -DOPPLER_TAIL_S, (cfg.clip_n - 1) / FS
    need = 0.0
    for speed in (v, -v):
        for t in (t_first, t_last):
            need = max(need, DOPPLER_MIN_RANGE * (1 + speed / ch.SPEED_OF_SOUND) - speed * t)
    return need + cfg.mic_spacing / 2  # the microphones sit ±d/2 off the array centre


def _room_and_array(rng: np.random.Generator, cfg: SceneConfig) -> tuple[ch.Room, np.ndarray]:
    room = ch.Room(tuple(float(rng.uniform(*r)) for r in cfg.room_size))
    size = np.asarray(room.size)
    centre = np.array([rng.uniform(0.35, 0.65) * size[0], rng.uniform(0.2, 0.5) * size[1],
                       rng.uniform(1.0, min(1.6, size[2] - 0.3))])
    return room, centre


def _place_source(rng: np.random.Generator, room: ch.Room, centre: np.ndarray,
                  distance: tuple[float, float]) -> tuple[float, float, np.ndarray]:
    for _ in range(200):
        r, az = rng.uniform(*distance), rng.uniform(0.0, 180.0)
        src = ch.source_position(centre, r, az)
        if room.contains(src, margin=0.2):
            return float(r), float(az), src
    raise ch.SceneError("could not place a source inside the room; widen acorn.data.room_size")


def ism_feasible(t60: float, size: tuple[float, float, float]) -> bool:
    """Whether Sabine's formula reaches ``t60`` in a shoebox of ``size`` (absorption <= 1)."""
    size = np.asarray(size, dtype=float)
    volume = float(np.prod(size))
    surface = 2.0 * float(size[0] * size[1] + size[0] * size[2] + size[1] * size[2])
    return 24.0 * np.log(10.0) * volume / (C * surface * t60) < 1.0


def sample_scene(task: str, rng: np.random.Generator, cfg: SceneConfig, source_id: int,
                 simulator: str = "component") -> dict | None:
    """One metadata row for ``task``; the label is computed from the physics drawn here.
    ``None`` when an ISM room cannot reach the drawn T60 (absorption would exceed 1)."""
    row: dict = {"task": task, "simulator": simulator, "source_id": int(source_id),
                 "seed": int(rng.integers(2**31 - 1)), "snr_db": float(rng.uniform(*cfg.snr_db)),
                 "noise": str(rng.choice(["white", "pink"])), "template": int(rng.integers(4)),
                 "mic_spacing": cfg.mic_spacing, "los": 1, "nlos_mode": "", "t60": 0.0,
                 "drr_db": np.nan, "n_reflections": 0, "v": 0.0, "d0": np.nan,
                 "distance": np.nan, "azimuth": np.nan, "label": np.nan, "label_class": -1}
    if task in ("los", "multipath", "doa"):
        room, centre = _room_and_array(rng, cfg)
        dist = cfg.doa_range if task == "doa" else cfg.los_range
        r, az, src = _place_source(rng, room, centre, dist)
        k = int(rng.integers(3))  # multipath class (drawn for every task: same stream)
        mics = ch.linear_array(centre, cfg.mic_spacing, cfg.n_mics)
        ch.check_scene(room, src, mics)
        row.update({"room_x": room.size[0], "room_y": room.size[1], "room_z": room.size[2],
                    "array_x": centre[0], "array_y": centre[1], "array_z": centre[2],
                    "src_x": src[0], "src_y": src[1], "src_z": src[2], "distance": r,
                    "azimuth": az})
        row["t60"] = float(rng.uniform(*cfg.t60))
        row["drr_db"] = float(rng.uniform(*cfg.drr_db))
        row["n_reflections"] = int(rng.integers(2, 9))
        if task == "los":
            row["los"] = int(rng.random() < 0.5)
            row["nlos_mode"] = "" if row["los"] else str(rng.choice(["removed", "obstructed"]))
            row["label"] = row["label_class"] = row["los"]
        elif task == "multipath":
            row["label"] = row["label_class"] = k
            if k == 0:
                row.update(t60=0.0, n_reflections=0, drr_db=np.inf)
            elif k == 1:
                row.update(t60=float(rng.uniform(*cfg.weak_t60)),
                           n_reflections=int(rng.integers(1, 4)),
                           drr_db=float(rng.uniform(5.0, 15.0)))
            else:
                row.update(t60=float(rng.uniform(*cfg.strong_t60)),
                           drr_db=float(rng.uniform(-5.0, 5.0)))
        else:
            row["drr_db"] = float(rng.uniform(0.0, 15.0))
            row["t60"] = float(rng.uniform(0.2, 0.8))
            row["label"] = ch.tdoa_samples(src, mics)
            row["label_class"] = int(row["label"] > 0)
        if simulator == "ism" and row["t60"] > 0 and not ism_feasible(row["t60"], room.size):
            return None  # Sabine cannot reach this T60 in this room: the caller redraws
    elif task == "doppler":
        v = float(rng.uniform(*cfg.speed))
        ch.check_speed(v)
        d0 = max(float(rng.uniform(12.0, 30.0)), doppler_min_start_range(v, cfg))
        row.update(v=v, d0=d0, azimuth=float(rng.uniform(0, 180)),
                   t60=float(rng.uniform(0.2, 0.6)), drr_db=float(rng.uniform(10.0, 20.0)),
                   label=float(ch.doppler_shift_percent(v)))
    elif task == "range":
        d = float(rng.uniform(*cfg.reflector))
        row.update(distance=d, label=d)
    else:
        raise ValueError(f"unknown task {task!r}")
    if task == "doppler":
        src = TONAL_CATALOGUE[source_id]
        row["question"] = question(task, row["template"], src.name, src.rest_hz)
    else:
        row["question"] = question(task, row["template"])
    row["answer"] = answer(task, row["label"])
    return row


def sample_split(tasks: dict[str, int], split: str, cfg: SceneConfig, bank_index: pd.DataFrame,
                 seed: int, simulator: str = "component", source_split: str | None = None
                 ) -> pd.DataFrame:
    """``tasks[task]`` rows per task for one split. Broadband sources come from the bank items
    assigned to ``source_split`` (default: ``split``), so splits never share a source item."""
    rng = np.random.default_rng(seed)
    pool = bank_index.index[bank_index["split"] == (source_split or split)].to_numpy()
    if pool.size == 0:
        raise ValueError(f"source bank has no items for split {source_split or split!r}")
    rows = []
    for task, n in tasks.items():
        for _ in range(n):
            sid = (int(rng.integers(len(TONAL_CATALOGUE))) if task == "doppler"
                   else -1 if task == "range" else int(rng.choice(pool)))
            for _ in range(1000):
                row = sample_scene(task, rng, cfg, sid, simulator)
                if row is not None:
                    break
            else:
                raise ch.SceneError(f"no room in acorn.data.room_size reaches the T60 of a "
                                    f"{task} item with the image-source model")
            rows.append(row)
    frame = pd.DataFrame(rows)
    frame.insert(0, "split", split)
    frame.insert(0, "item", np.arange(len(frame)))
    return frame


# ------------------------------------------------------------------------ rendering
def _segment(source: np.ndarray, n: int, rng: np.random.Generator, focus: int) -> np.ndarray:
    """A random ``n``-sample stretch of ``source`` (tiled if shorter) whose last ``focus``
    samples (those the direct path brings into the clip) are not silent: up to 8 random
    starts, else the loudest window."""
    if source.size < n + 1:
        source = np.resize(source, n + source.size)
    energy = np.concatenate([[0.0], np.cumsum(np.asarray(source, dtype=np.float64) ** 2)])
    starts = np.arange(source.size - n + 1)
    loud = energy[starts + n] - energy[starts + n - focus]  # energy of the focus window
    target = 0.3 ** 2 * focus
    start = int(np.argmax(loud))
    for _ in range(8):
        candidate = int(rng.integers(0, starts.size))
        if loud[candidate] > target:
            start = candidate
            break
    return np.asarray(source[start:start + n], dtype=np.float64)


def _geometry(row) -> tuple[ch.Room, np.ndarray, np.ndarray]:
    room = ch.Room((row.room_x, row.room_y, row.room_z))
    centre = np.array([row.array_x, row.array_y, row.array_z])
    mics = ch.linear_array(centre, row.mic_spacing, 2)
    src = np.array([row.src_x, row.src_y, row.src_z])
    ch.check_scene(room, src, mics)
    return room, src, mics


def component_cir(row, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Per-mic CIRs (direct part, remaining part), each (n_mics, CIR_SECONDS·fs): LOS tap,
    image-source early reflections, six-band tail scaled to the row's DRR; NLOS removes or
    obstructs the direct tap after scaling."""
    room, src, mics = _geometry(row)
    n = int(CIR_SECONDS * FS)
    direct = np.zeros((len(mics), n))
    early = np.zeros((len(mics), n))
    tail = np.zeros((len(mics), n))
    r_mic = np.linalg.norm(mics - src, axis=1)
    for m, r in enumerate(r_mic):
        ch.add_tap(direct[m], r / C * FS, 1.0 / r)
    if row.t60 > 0:
        images = ch.image_sources(room, src, max_order=2)
        extra = np.linalg.norm(images - mics.mean(axis=0), axis=1) - r_mic.mean()
        ok = np.flatnonzero((extra >= 0.001 * C) & (extra <= 0.040 * C))
        if ok.size == 0:
            ok = np.argsort(extra)[:row.n_reflections]
        chosen = rng.choice(ok, size=min(row.n_reflections, ok.size), replace=False)
        rho = rng.uniform(0.3, 0.9, size=chosen.size) * rng.choice([-1.0, 1.0], size=chosen.size)
        for img, g in zip(images[chosen], rho, strict=True):
            for m, mic in enumerate(mics):
                ri = float(np.linalg.norm(img - mic))
                ch.add_tap(early[m], ri / C * FS, g / ri)  # α_i = ρ_i · r0/r_i · α0 = ρ_i/r_i
        onset = r_mic.min() / C + rng.uniform(0.020, 0.050)
        for m in range(len(mics)):
            tail[m] = ch.reverb_tail(n, row.t60, onset, rng)
        # the tail carries 1–4× the early energy; then the whole non-direct part is scaled so
        # that mic 1's DRR is exactly the row's value
        e_early = np.sum(early[0] ** 2)
        tail *= np.sqrt(max(e_early, 1e-12) * rng.uniform(1.0, 4.0) / np.sum(tail[0] ** 2))
        rest = early + tail
        gain = np.sqrt(np.sum(direct[0] ** 2) / np.sum(rest[0] ** 2) / 10 ** (row.drr_db / 10))
        rest *= gain
    else:
        rest = early
    if not row.los:
        if row.nlos_mode == "removed":
            direct[:] = 0.0
        else:
            att, fc = rng.uniform(20.0, 40.0), rng.uniform(300.0, 1200.0)
            direct = np.stack([ch.obstruct(d, att, fc) for d in direct])
    return direct, rest


def _render_doppler(row, rng: np.random.Generator, clip_n: int) -> np.ndarray:
    src = TONAL_CATALOGUE[int(row.source_id)]
    pre = 0.2
    s = render_tonal(src, clip_n + int(2 * pre * FS) + 2 * FS // 10, rng)
    # two mics ±d/2 along the array axis: their distances to the source differ by d·cos(az)
    offs = np.array([-0.5, 0.5]) * row.mic_spacing * np.cos(np.deg2rad(row.azimuth))
    n_h = int(DOPPLER_TAIL_S * FS)  # the weak tail; d0 is the range at the clip's first sample
    out = []
    for off in offs:
        y = ch.render_moving_source(s, row.v, row.d0 + off, clip_n + n_h, start=pre,
                                    t0=-n_h / FS)
        h = np.zeros(n_h)
        h[0] = 1.0
        tail = ch.reverb_tail(n_h, row.t60, 0.02, rng)
        tail *= np.sqrt(1.0 / np.sum(tail ** 2) / 10 ** (row.drr_db / 10))
        from scipy.signal import fftconvolve

        out.append(fftconvolve(y, h + tail)[n_h:n_h + clip_n])
    return np.stack(out)


def _render_range(row, rng: np.random.Generator, clip_n: int) -> np.ndarray:
    probe = ch.fmcw_chirp()
    h = np.zeros(clip_n)
    ch.add_tap(h, RANGE_EMIT_AT + rng.uniform(0.0001, RANGE_LEAK_MAX_S) * FS,
               rng.uniform(0.3, 1.0))
    beta = rng.uniform(0.5, 1.0) / (2.0 * row.distance) ** 2
    echo = np.zeros(clip_n)
    ch.add_tap(echo, RANGE_EMIT_AT + ch.echo_delay_samples(row.distance), beta)
    for _ in range(int(rng.integers(1, 4))):  # weak clutter, 8–26 dB below the target echo
        dc = rng.uniform(0.3, 6.0)
        ch.add_tap(h, RANGE_EMIT_AT + ch.echo_delay_samples(dc),
                   beta * rng.uniform(0.05, 0.4) * rng.choice([-1.0, 1.0]))
    from scipy.signal import fftconvolve

    y_echo = fftconvolve(probe, echo)[:clip_n]
    y = fftconvolve(probe, h)[:clip_n] + y_echo
    ref = float(np.mean(y_echo[y_echo != 0] ** 2)) if np.any(y_echo) else 1.0
    return np.stack([y, y.copy()]), ref


def _render_ism(row, source: np.ndarray, rng: np.random.Generator, clip_n: int) -> np.ndarray:
    """T2: the same scene re-rendered with pyroomacoustics' image-source ShoeBox (max order
    ≤ 15, absorption from Sabine's formula); NLOS = full RIR minus the order-0 RIR."""
    import pyroomacoustics as pra

    room, src, mics = _geometry(row)

    def rirs(max_order: int, absorption: float) -> list[np.ndarray]:
        shoebox = pra.ShoeBox(list(room.size), fs=FS, materials=pra.Material(absorption),
                              max_order=max_order)
        shoebox.add_source(src)
        shoebox.add_microphone_array(mics.T)
        shoebox.compute_rir()
        return [np.asarray(shoebox.rir[m][0], dtype=float) for m in range(len(mics))]

    if row.t60 > 0:
        absorption, order = pra.inverse_sabine(row.t60, list(room.size))
        full = rirs(min(int(order), 15), float(absorption))
    else:
        full = rirs(0, 1.0)
    if not row.los:
        direct = rirs(0, 1.0)
        n = max(max(len(h) for h in full), max(len(h) for h in direct))
        full = [np.pad(f, (0, n - len(f))) - np.pad(d, (0, n - len(d)))
                for f, d in zip(full, direct, strict=True)]
    n = int(CIR_SECONDS * FS)
    h = np.stack([np.pad(f, (0, max(0, n - len(f))))[:n] for f in full])
    return ch.convolve_clip(_segment(source, clip_n + n, rng, clip_n), h, clip_n)


def render_item(row, sources: list[np.ndarray], clip_n: int) -> np.ndarray:
    """The (2, clip_n) float32 clip of one metadata row; deterministic in ``row.seed``."""
    rng = np.random.default_rng(int(row.seed))
    reference = None
    if row.task == "doppler":
        y = _render_doppler(row, rng, clip_n)
    elif row.task == "range":
        y, reference = _render_range(row, rng, clip_n)
    elif row.simulator == "ism":
        y = _render_ism(row, sources[int(row.source_id)], rng, clip_n)
    else:
        direct, rest = component_cir(row, rng)
        s = _segment(sources[int(row.source_id)], clip_n + direct.shape[1], rng, clip_n)
        y = ch.convolve_clip(s, direct + rest, clip_n)
    y = ch.add_noise(y, row.snr_db, rng, row.noise, reference_power=reference)
    if not np.all(np.isfinite(y)) or not np.any(y):
        raise ValueError(f"item {row.item} ({row.task}) rendered silent or non-finite audio; "
                         f"check source {row.source_id} of the source bank")
    return y.astype(np.float32)


def render_split(meta: pd.DataFrame, sources: list[np.ndarray], clip_n: int,
                 progress: bool = False, desc: str = "render", dtype=np.float32,
                 n_jobs: int = 1) -> np.ndarray:
    """Every row of ``meta`` rendered, shape (n, 2, clip_n), stored as ``dtype`` (the float32
    clips cast one at a time: float16 holds the paper config's 200,000 training clips of 4 s in
    51 GB instead of 102 GB).

    ``n_jobs`` worker processes (``0``: one per CPU core) render chunks of rows; as each clip
    depends only on its row (:func:`render_item`), the array is the same for every ``n_jobs``.
    At the paper's 223,000 clips of 4 s one core needs hours (docs/scale.md)."""
    from tqdm.auto import tqdm

    from icml25.core.workers import chunks, process_map, resolve_workers

    if len(meta) == 0:
        raise ValueError(f"{desc}: empty metadata table")
    workers = resolve_workers(n_jobs, len(meta), min_items=32)  # at least 32 clips each
    out = np.zeros((len(meta), 2, clip_n), dtype=dtype)
    if workers == 1:
        for i, row in enumerate(tqdm(meta.itertuples(), total=len(meta), desc=desc,
                                     disable=not progress, leave=False)):
            out[i] = render_item(row, sources, clip_n)
        return out
    jobs = [(rows, clip_n, dtype) for rows in chunks(meta, workers)]
    start = 0
    for part in tqdm(process_map(_render_chunk, jobs, workers, initializer=_set_worker_sources,
                                 initargs=(sources,)),
                     total=len(jobs), desc=f"{desc} ({workers} processes)",
                     disable=not progress, leave=False):
        out[start:start + len(part)] = part
        start += len(part)
    return out


_WORKER_SOURCES: list[np.ndarray] = []


def _set_worker_sources(sources: list[np.ndarray]) -> None:
    """A render worker's copy of the source bank, sent once per process."""
    _WORKER_SOURCES[:] = sources


def _render_chunk(rows: pd.DataFrame, clip_n: int, dtype) -> np.ndarray:
    out = np.zeros((len(rows), 2, clip_n), dtype=dtype)
    for i, row in enumerate(rows.itertuples()):
        out[i] = render_item(row, _WORKER_SOURCES, clip_n)
    return out
