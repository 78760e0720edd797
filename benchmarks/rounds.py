"""Rotated rounds: measure several things in turn, each round in another order, and compare
them round by round.

This machine is shared: a burst of load from other work lands on whatever runs at that moment.
Rotating the order spreads it over every figure, and a ratio taken within each round (then the
median over rounds) compares figures measured under the same load.
"""

from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import harness


def rotated(items: Sequence[Any], round_no: int) -> List[Any]:
    shift = round_no % len(items)
    return list(items[shift:]) + list(items[:shift])


class Samples:
    """Timings by name, each tagged with its round: a ratio compares figures of the same round, so
    a burst of load from other work (this machine is shared) skews neither side alone."""

    def __init__(self) -> None:
        self.data: Dict[str, List[Tuple[int, float]]] = {}

    def add(self, name: str, round_no: int, *values: float) -> None:
        self.data.setdefault(name, []).extend((round_no, v) for v in values)

    def values(self, name: str) -> List[float]:
        return [v for _, v in self.data.get(name, [])]

    def median(self, name: str) -> float:
        return harness.percentile(self.values(name), 50)

    def ratio(self, name: str, base: str) -> float:
        """The median over rounds of (this round's median of ``name`` / its median of ``base``)."""
        def by_round(key: str) -> Dict[int, List[float]]:
            out: Dict[int, List[float]] = {}
            for r, v in self.data.get(key, []):
                out.setdefault(r, []).append(v)
            return out

        mine, theirs = by_round(name), by_round(base)
        return harness.percentile([harness.percentile(mine[r], 50) / harness.percentile(theirs[r], 50)
                                   for r in mine if r in theirs], 50)
