"""A registry transfer's pace on a fake clock: a slow but live layer passes, a trickle fails, and the whole is
capped by what it claims (as curl's --speed-limit/--speed-time)."""

from __future__ import annotations

import pytest

from repoinstall._oci.client import Pace, RegistryError


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def send(pace: Pace, clock: Clock, total: int, per_second: float, read: int) -> None:
    """``total`` bytes in reads of ``read`` bytes, arriving at ``per_second``."""
    while total > 0:
        count = min(read, total)
        clock.now += count / per_second
        pace.add(count)
        total -= count


def test_a_slow_but_live_torch_layer_passes() -> None:
    clock = Clock()
    size = 2_500_000_000
    pace = Pace(16 << 10, 60.0, size, "layer", clock)
    send(pace, clock, size, 1_000_000, 64 << 10)  # 1 MB/s: 42 minutes
    # Slower still, down to just above the bound, and with a stall shorter than the window.
    pace = Pace(16 << 10, 60.0, 50_000_000, "layer", clock)
    send(pace, clock, 10_000_000, 20_000, 16 << 10)
    clock.now += 20
    send(pace, clock, 10_000_000, 1_000_000, 64 << 10)


def test_a_trickle_fails_within_about_a_window() -> None:
    clock = Clock()
    start = clock.now
    pace = Pace(16 << 10, 60.0, 2_500_000_000, "layer", clock)
    with pytest.raises(RegistryError, match=r"layer: slower than 16384 bytes/s for 60\.\ds \(--registry-min-rate\)"):
        send(pace, clock, 10_000, 20, 1)
    assert clock.now - start < 61


def test_the_whole_is_capped_by_what_it_claims() -> None:
    clock = Clock()
    pace = Pace(100, 10.0, 1000, "layer", clock)  # at 100 bytes/s, 1000 bytes take 10 s: cap at 20 s
    with pytest.raises(RegistryError, match=r"slower than 100 bytes/s in all"):
        send(pace, clock, 2500, 101, 1)
    assert clock.now > 1020
