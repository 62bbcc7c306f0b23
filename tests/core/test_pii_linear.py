"""Every PII pattern, and `anonymise` as a whole, takes time linear in the length of its input (issue
28: a name cue with nested optional whitespace and the e-mail local part stalled the server).

Each check times one detector on an adversarial input of 100 KB and of 1 MB and asserts that ten
times the input costs at most fifteen times the time (a quadratic pattern costs about a hundred
times). It is a ratio of CPU times of this thread (other processes on the machine do not count), not
a wall-clock threshold: the best of a few repeats damps noise and the collector is paused while
timing. A CPU-time alarm stops a run that has already taken far longer than linear growth from a
tenth of its input allows, so a regression fails in seconds, not hours.
"""

from __future__ import annotations

import gc
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from core.text import pii

pytestmark = pytest.mark.slow

TINY = 10_000  # only to stop a 100 KB run that is already far too slow
SMALL = 100_000
LARGE = 1_000_000
MAX_RATIO = 15.0
FLOOR_SEC = 0.002  # below this a small-input time is mostly timer noise


def _fill(unit: str, size: int, head: str = "") -> str:
    """`head` then `unit` repeated to exactly `size` characters."""
    body = unit * ((size - len(head)) // len(unit) + 1)
    return (head + body)[:size]


def _distinct_names(size: int) -> str:
    """A cue before a different name every 12 characters: "Mr Aaaaa. Mr Aaaab. …"."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    parts, length, i = [], 0, 0
    while length < size:
        word = "".join(letters[(i // 26**k) % 26] for k in range(4))
        part = f"Mr A{word}. "
        parts.append(part)
        length += len(part)
        i += 1
    return "".join(parts)[:size]


# Inputs shaped against each pattern: long runs a pattern can start in at every position, or runs
# of optional separators a pattern could split in many ways before failing.
ADVERSARIAL: dict[str, Callable[[int], str]] = {
    "spaces after a cue": lambda n: _fill(" ", n - 1, "my name is") + "x",
    "newlines and spaces after a sign-off": lambda n: _fill(" \n", n - 1, "regards,") + "x",
    "sign-offs with blank lines": lambda n: _fill("regards,\n \n \n \n", n),
    "honorifics": lambda n: _fill("Mr ", n),
    "capitalised words after a cue": lambda n: _fill("Aaa ", n, "Dr "),
    "capitalised words and initials": lambda n: _fill("Ab C. ", n, "this is "),
    "a different name per cue": _distinct_names,
    # the words of a name found by its cue, repeated and cut one word short of it
    "a cued name's words": lambda n: _fill("Xy Xy Xy Xy Xy Q ", n, "Mr Xy Xy Xy Xy Xy Xy. "),
    "dotted local part without @": lambda n: _fill("a.", n),
    "percent local part without @": lambda n: _fill("%", n),
    "at signs": lambda n: _fill("a@", n),
    "a domain that never ends": lambda n: _fill("a.", n, "x@"),
    "digits and spaces": lambda n: _fill("1 ", n),
    "digits and dashes": lambda n: _fill("12-", n),
    "capital letters and digits": lambda n: _fill("GB82 ", n),
    "dotted digits": lambda n: _fill("1.", n),
    "hex and colons": lambda n: _fill("a:", n),
    "colons": lambda n: _fill(":", n),
}


class _TooSlow(Exception):
    pass


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    """_TooSlow in the main thread once this process has used `seconds` of CPU time (SIGVTALRM: the
    regex engine checks for signals; SIGALRM is pytest-timeout's)."""

    def _raise(signum: int, frame: object) -> None:
        raise _TooSlow

    previous = signal.signal(signal.SIGVTALRM, _raise)
    signal.setitimer(signal.ITIMER_VIRTUAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_VIRTUAL, 0)
        signal.signal(signal.SIGVTALRM, previous)


def _best(run: Callable[[str], object], text: str, *, least: int, most: int, budget: float) -> float:
    """The best of at least `least` and at most `most` runs, repeated while under `budget` seconds
    (a cheap run is repeated more: a single descheduling cannot decide its ratio)."""
    best, spent, runs = float("inf"), 0.0, 0
    while runs < least or (runs < most and spent < budget):
        start = time.thread_time()
        run(text)
        elapsed = time.thread_time() - start
        best, spent, runs = min(best, elapsed), spent + elapsed, runs + 1
    return best


@contextmanager
def _collector_paused() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _assert_linear(run: Callable[[str], object], build: Callable[[int], str], what: str) -> None:
    tiny, small, large = build(TINY), build(SMALL), build(LARGE)
    assert (len(tiny), len(small), len(large)) == (TINY, SMALL, LARGE)

    def timed(text: str, limit: float, **repeats: Any) -> float:
        """Safety net only, far beyond MAX_RATIO: a run over `limit` seconds fails at once."""
        try:
            with _deadline(limit):
                return _best(run, text, **repeats)
        except _TooSlow:
            pytest.fail(
                f"{what}: {len(text):,} characters took over {limit:.1f} s, {2 * MAX_RATIO:.0f}x "
                "the time of a tenth of them"
            )

    with _collector_paused():
        t_tiny = _best(run, tiny, least=2, most=10, budget=0.05)
        t_small = max(timed(small, 2 * MAX_RATIO * t_tiny + 1.0, least=2, most=10, budget=0.1), FLOOR_SEC)
        t_large = timed(large, 2 * MAX_RATIO * t_small + 1.0, least=1, most=1, budget=0)
        if t_large < 0.3:  # repeat a cheap run: one descheduling must not decide its ratio
            t_large = min(t_large, _best(run, large, least=0, most=5, budget=0.3 - t_large))
    ratio = t_large / t_small
    assert ratio <= MAX_RATIO, f"{what}: 100 KB {t_small:.4f} s, 1 MB {t_large:.4f} s, ratio {ratio:.1f}"


def _consume(iterator: Iterator[object]) -> None:
    for _ in iterator:
        pass


# Each regex on the inputs shaped against it (every regex on every input would take minutes).
PATTERNS = {
    "email": (
        pii._EMAIL,
        [
            "dotted local part without @",
            "percent local part without @",
            "at signs",
            "a domain that never ends",
            "capitalised words and initials",
        ],
    ),
    "card": (pii._CARD, ["digits and spaces", "digits and dashes", "dotted digits"]),
    "iban": (pii._IBAN, ["capital letters and digits", "digits and spaces"]),
    "ipv4": (pii._IPV4, ["dotted digits", "digits and spaces"]),
    "ipv6": (pii._IPV6, ["hex and colons", "colons", "dotted digits"]),
    "name cues": (
        pii._NAME_CUES,
        [
            "spaces after a cue",
            "newlines and spaces after a sign-off",
            "sign-offs with blank lines",
            "honorifics",
            "capitalised words after a cue",
            "capitalised words and initials",
            "a different name per cue",
        ],
    ),
}


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
def test_each_pattern_is_linear_on_its_adversarial_inputs(pattern: str) -> None:
    regex, inputs = PATTERNS[pattern]
    for name in inputs:
        _assert_linear(lambda text: _consume(regex.finditer(text)), ADVERSARIAL[name], f"{pattern} on {name}")


@pytest.mark.parametrize("name", ["digits and spaces"])
def test_phone_matching_is_linear(name: str) -> None:
    _assert_linear(lambda text: _consume(pii._phones(text, "US")), ADVERSARIAL[name], f"phones on {name}")


# Known names as well as those a text brings by cue are looked for everywhere in it (formerly one
# scan per name: quadratic when every cue brought a new name).
KNOWN_NAMES = ["Ana Souza", "Aaa Aaa Aaa", "Ab C. Ab", "Mr Mr"]

# phonenumbers is pure Python and costs about 5 µs a character on digits: it is timed alone above on
# the costliest input, and here on one cheaper digit input (the regexes see the others above).
PHONE_HEAVY = {"digits and spaces", "dotted digits", "capital letters and digits"}


@pytest.mark.parametrize("name", sorted(set(ADVERSARIAL) - PHONE_HEAVY))
def test_anonymise_is_linear(name: str) -> None:
    _assert_linear(lambda text: pii.anonymise(text, known_names=KNOWN_NAMES), ADVERSARIAL[name], name)


def test_limits_keep_the_detections() -> None:
    """The bounds do not lose what they bound: a 64-character local part, a six-word name, a phone
    number after a long line of digits (phonenumbers alone stops after 65,535 candidates)."""
    local = "a" * 64
    assert pii.anonymise(f"write to {local}@example.org").text == "write to [EMAIL]"
    assert pii.anonymise(f"write to x{local}@example.org").text == f"write to x{local}@example.org"
    six = "Ana Beatriz Carla Dora Eva Fonseca"
    assert pii.anonymise(f"Regards,\n\n{six}").names == {six}
    text = "1 " * 80_000 + "\ncall (415) 555-2671 now"  # missed before issue 28
    assert pii.anonymise(text).text.endswith("call [PHONE] now")
    result = pii.anonymise("Regards,\nAna\nSouza. Ana  Souza agreed.")
    assert result.text == "Regards,\n[PERSON]. [PERSON] agreed."
