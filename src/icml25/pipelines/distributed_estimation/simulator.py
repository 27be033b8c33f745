"""The terminals-and-decoder simulator: every protocol at every sweep point, K and repetition.

See ``docs/papers/distributed_estimation.md``, "Data" and "Baselines". For each point
``(m, n, l)`` of a sweep, each histogram size ``K`` of the grid and each repetition, the symbol
distribution of the model is computed exactly, every protocol is simulated (its transcript is
checked against the budget ``l`` bit by bit) and its integrated squared error recorded. The layered
protocol is a deterministic rule over sub-protocols (``full``/``bf``/``at`` by regime), so its rows
re-use the sub-protocol's run at the same seed (at ``l = 0`` every bit-limited protocol gives the
uninformed estimate, see :mod:`.protocols`). Seeds: one ``SeedSequence`` per
(base seed, repetition, protocol, m, n, l, K).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
from tqdm.auto import tqdm

from icml25.core.lazy_import import lazy_module
from icml25.pipelines.distributed_estimation import protocols as proto
from icml25.pipelines.distributed_estimation.functions import TrueModel

pd = lazy_module("pandas")

SIMULATED = tuple(proto.PROTOCOLS)
LAYERED = "layered"


@dataclass(frozen=True)
class Point:
    m: int
    n: int
    l: int  # noqa: E741 - the paper's name for the bit budget


def check_point(point: Point, min_total_samples: int) -> None:
    """Refuse a point with no budget or too few samples for any estimate."""
    if point.l < 0:
        raise ValueError(f"bit budget l={point.l} < 0: a terminal sends l >= 0 bits")
    if point.m < 1 or point.n < 1:
        raise ValueError(f"need m >= 1 and n >= 1, got m={point.m}, n={point.n}")
    if point.m * point.n < min_total_samples:
        raise ValueError(f"n·m = {point.m * point.n} is too small for any estimate "
                         f"(need >= {min_total_samples})")


def _rng(base_seed: int, rep: int, protocol: str, point: Point, k: int) -> np.random.Generator:
    key = (rep, SIMULATED.index(protocol), point.m, point.n, point.l, k)
    return np.random.default_rng(np.random.SeedSequence(entropy=base_seed, spawn_key=key))


def run_protocol(model: TrueModel, protocol: str, point: Point, k: int, rng: np.random.Generator,
                 width_factor: float = 3.0, quant_bits: int = 2) -> dict:
    """One protocol run at one (m, n, l, K): ISE, bits (checked against l) and time."""
    p = model.symbol_distribution(k)
    start = time.perf_counter()
    try:
        res = proto.PROTOCOLS[protocol](
            p, point.m, point.n, point.l, rng, p_bound=model.p_bound(k),
            width_factor=width_factor, quant_bits=quant_bits,
            shared_seed=int(rng.integers(2**31)))
    except proto.NotApplicable:
        return {"applicable": False, "ise": np.nan, "bits_max": np.nan, "bits_mean": np.nan,
                "seconds": 0.0}
    seconds = time.perf_counter() - start
    if res.transcript is not None:
        res.transcript.check_budget(point.l)
        bits_max, bits_mean = res.transcript.max_bits, res.transcript.mean_bits
    else:
        bits_max = bits_mean = np.nan  # the unconstrained oracle sends no messages
    return {"applicable": True, "ise": model.ise(res.p_hat, k), "bits_max": bits_max,
            "bits_mean": bits_mean, "seconds": seconds}


def simulate_sweep(name: str, model: TrueModel, points: Sequence[Point], k_grid: Sequence[int],
                   protocols: Iterable[str], reps: Sequence[int], base_seed: int,
                   width_factor: float = 3.0, quant_bits: int = 2, min_total_samples: int = 8,
                   progress: bool = True) -> pd.DataFrame:
    """All rows of one sweep (one per protocol, point, K, repetition), layered rows included."""
    protocols = list(protocols)
    unknown = sorted(set(protocols) - set(SIMULATED) - {LAYERED})
    if unknown:
        raise ValueError(f"unknown protocols {unknown}; expected some of {SIMULATED}")
    simulated = [p for p in SIMULATED if p in protocols or
                 (LAYERED in protocols and p in ("full", "bf", "at"))]
    for point in points:
        check_point(point, min_total_samples)
    rows = []
    jobs = [(pt, k) for pt in points for k in k_grid]
    for pt, k in tqdm(jobs, desc=f"simulate {name}", disable=not progress, leave=False):
        a = model.alphabet(k)
        for rep in reps:
            by_protocol = {}
            for protocol in simulated:
                row = run_protocol(model, protocol, pt, k, _rng(base_seed, rep, protocol, pt, k),
                                   width_factor, quant_bits)
                by_protocol[protocol] = row
                rows.append({"protocol": protocol, "sub": protocol, **row, "rep": rep,
                             "m": pt.m, "n": pt.n, "l": pt.l, "K": k, "A": a})
            if LAYERED in protocols:
                sub = proto.layered_choice(a, pt.n, pt.l)
                # at l = 0 every sub-protocol returns the same uninformed estimate
                run = by_protocol["bf" if sub == "uninformed" else sub]
                rows.append({"protocol": LAYERED, "sub": sub, **run, "rep": rep,
                             "m": pt.m, "n": pt.n, "l": pt.l, "K": k, "A": a})
    frame = pd.DataFrame(rows)
    frame.insert(0, "sweep", name)
    frame.insert(1, "model", model.model)
    return frame
