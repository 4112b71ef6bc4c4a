"""``stop_group``: the one rule both stdio clients (Trio's ``_stdio``, ``BlockingClient``'s
``_blocking_bytes``) follow to stop what a reaped server left in its process group. No
process here: ``os.killpg`` is replaced by a script of the group's answers, and the
sleeps the rule asks for advance a clock of the test's own."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable

import pytest

from mcp_trio._process_group import GROUP_POLL, stop_group

pytestmark = pytest.mark.skipif(not hasattr(os, "killpg"), reason="POSIX process groups")

GROUP = 4242


def run(
    monkeypatch: pytest.MonkeyPatch,
    answer: Callable[[int, float], None],
    *,
    grace: float = 0.2,
    urgent: bool = False,
) -> tuple[list[tuple[float, int]], list[float]]:
    """Drive ``stop_group`` as a client does: the signals it sent (with the clock's time
    then) and the pauses it asked for. ``answer(signal, now)`` raises as the group
    would."""
    clock = [100.0]
    sent: list[tuple[float, int]] = []

    def killpg(group: int, signum: int) -> None:
        assert group == GROUP
        sent.append((clock[0], signum))
        answer(signum, clock[0])

    monkeypatch.setattr(os, "killpg", killpg)
    pauses: list[float] = []
    for pause in stop_group(GROUP, grace, lambda: clock[0], urgent=urgent):
        assert 0 < pause <= GROUP_POLL
        pauses.append(pause)
        clock[0] += pause
    return sent, pauses


def test_an_empty_group_gets_one_sigterm_and_nothing_more(monkeypatch: pytest.MonkeyPatch) -> None:
    def answer(signum: int, now: float) -> None:
        raise ProcessLookupError

    sent, pauses = run(monkeypatch, answer)
    assert sent == [(100.0, signal.SIGTERM)]
    assert pauses == []


def test_a_group_that_stays_gets_sigkill_once_the_grace_is_up(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent, pauses = run(monkeypatch, lambda signum, now: None, grace=0.12)
    # Looks every GROUP_POLL, the last pause cut at the grace's end, then SIGKILL.
    assert pauses == pytest.approx([GROUP_POLL, GROUP_POLL, 0.12 - 2 * GROUP_POLL])
    assert [signum for _, signum in sent] == [signal.SIGTERM, 0, 0, 0, signal.SIGKILL]
    assert sent[-1][0] == pytest.approx(100.12)


def test_a_group_that_leaves_after_sigterm_gets_no_sigkill(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def answer(signum: int, now: float) -> None:
        if signum == 0 and now >= 100.0 + GROUP_POLL:
            raise ProcessLookupError  # (gone at the second look)

    sent, pauses = run(monkeypatch, answer, grace=10.0)
    assert [signum for _, signum in sent] == [signal.SIGTERM, 0, 0]
    assert pauses == [GROUP_POLL]


def test_urgent_is_sigkill_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    sent, pauses = run(monkeypatch, lambda signum, now: None, urgent=True)
    assert sent == [(100.0, signal.SIGKILL)]
    assert pauses == []


def test_no_grace_is_sigterm_then_sigkill_with_no_wait(monkeypatch: pytest.MonkeyPatch) -> None:
    sent, pauses = run(monkeypatch, lambda signum, now: None, grace=0.0)
    assert sent == [(100.0, signal.SIGTERM), (100.0, signal.SIGKILL)]
    assert pauses == []


def test_a_group_of_another_user_is_left_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # (A member that changed its user: EPERM, as for an empty group, nothing more.)
    def answer(signum: int, now: float) -> None:
        raise PermissionError

    sent, pauses = run(monkeypatch, answer)
    assert sent == [(100.0, signal.SIGTERM)]
    assert pauses == []
