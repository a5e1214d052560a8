"""Retry-After on a 429 or 503 is honoured (up to a bound); other failures back off with jitter."""

from __future__ import annotations

import pytest

from repoinstall._errors import ResolutionError
from repoinstall._index.http import RETRY_AFTER_MAX, Pause, Reply, get, retry_after


def test_retry_after_reads_seconds_and_dates() -> None:
    assert retry_after("7") == 7.0
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == pytest.approx(10.0)
    assert retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412490.0) == 0.0  # already past
    assert retry_after(None) is None and retry_after("soon") is None


def _pauses(*replies: Reply) -> tuple[list[float], object]:
    plan = get("https://index.example/simple/demo/", retries=len(replies) - 1, what="index")
    pauses: list[float] = []
    step = next(plan)
    try:
        for reply in replies:
            step = plan.send(reply)
            while isinstance(step, Pause):
                pauses.append(step.seconds)
                step = plan.send(None)
    except StopIteration as done:
        return pauses, done.value
    except ResolutionError as error:
        return pauses, error
    return pauses, step


def test_a_429_waits_as_long_as_the_server_asks() -> None:
    url = "https://index.example/simple/demo/"
    pauses, final = _pauses(Reply(url, 429, retry_after=3.0), Reply(url, 503, retry_after=500.0), Reply(url, 200))
    assert pauses == [3.0, RETRY_AFTER_MAX]
    assert isinstance(final, Reply) and final.status == 200


def test_without_retry_after_the_pause_is_a_jittered_backoff() -> None:
    url = "https://index.example/simple/demo/"
    pauses, final = _pauses(Reply(url, 500), Reply(url, 500))
    assert len(pauses) == 1 and 0.1 < pauses[0] < 0.4
    assert isinstance(final, ResolutionError) and "HTTP 500 (2 attempts)" in str(final)
