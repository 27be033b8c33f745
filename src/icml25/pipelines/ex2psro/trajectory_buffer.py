"""The top-K trajectory buffer of Ex2PSRO (docs/papers/ex2psro.md, "The method").

Every simulated episode (empirical-game estimation and response training) is offered; the buffer
keeps the K best by a criterion of the two players' returns (G0, G1), ties broken by insertion
order (earlier first). Offers are inserted in chunks so the buffer is not re-sorted per episode;
candidates below the current K-th value are discarded at once.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

CRITERIA: dict[str, Callable[[float, float], float]] = {
    "ex2psro": lambda g0, g1: min(g0, g1),        # high welfare and both players do well
    "maxwelfare": lambda g0, g1: g0 + g1,
    "minwelfare": lambda g0, g1: -(g0 + g1),
}


class TopKTrajectories:
    """Keep the ``capacity`` items with the largest ``criterion(G0, G1)``."""

    def __init__(self, capacity: int, criterion: str = "ex2psro", chunk: int = 500):
        if capacity < 1:
            raise ValueError(f"trajectory buffer capacity must be >= 1, got {capacity}")
        if criterion not in CRITERIA:
            raise ValueError(f"unknown selection criterion {criterion!r}; known: {list(CRITERIA)}")
        self.capacity = capacity
        self.score = CRITERIA[criterion]
        self.chunk = chunk
        self._kept: list[tuple[float, int, Any]] = []
        self._pending: list[tuple[float, int, Any]] = []
        self._count = 0

    def offer(self, returns: tuple[float, float], item: Any) -> None:
        value = float(self.score(*returns))
        index = self._count
        self._count += 1
        if len(self._kept) >= self.capacity and value <= self._kept[-1][0]:
            return  # at or below the K-th kept value: an earlier insertion wins the tie
        self._pending.append((value, index, item))
        if len(self._pending) >= self.chunk:
            self._flush()

    def _flush(self) -> None:
        merged = sorted(self._kept + self._pending, key=lambda e: (-e[0], e[1]))
        self._kept = merged[: self.capacity]
        self._pending = []

    def items(self) -> list[Any]:
        """The kept items, best first."""
        self._flush()
        return [item for _, _, item in self._kept]

    def values(self) -> list[float]:
        self._flush()
        return [value for value, _, _ in self._kept]

    def __len__(self) -> int:
        self._flush()
        return len(self._kept)
