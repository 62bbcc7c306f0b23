"""PII detection (core.text.pii): what is replaced, by which placeholder, and what is left alone."""

from __future__ import annotations

import pytest

from core.text.pii import anonymise

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "expected", "kind"),
    [
        ("write to ana.souza+news@mail.example.org today", "write to [EMAIL] today", "email"),
        ("call +44 20 7946 0958 now", "call [PHONE] now", "phone"),
        ("call (415) 555-2671 now", "call [PHONE] now", "phone"),
        ("card 4111 1111 1111 1111 ok", "card [CREDIT_CARD] ok", "credit_card"),
        ("card 5500-0000-0000-0004 ok", "card [CREDIT_CARD] ok", "credit_card"),
        ("iban GB82 WEST 1234 5698 7654 32 ok", "iban [IBAN] ok", "iban"),
        ("iban DE89370400440532013000 ok", "iban [IBAN] ok", "iban"),
        ("from 192.168.10.20 and 2001:db8::ff00:42:8329", "from [IP_ADDRESS] and [IP_ADDRESS]", "ip_address"),
        ("Hello, my name is Ana Souza.", "Hello, my name is [PERSON].", "person"),
        ("Dr. Watson will see you", "Dr. [PERSON] will see you", "person"),
    ],
)
def test_each_kind_is_replaced_by_its_placeholder(text: str, expected: str, kind: str) -> None:
    result = anonymise(text)
    assert result.text == expected
    assert set(result.counts) == {kind}


@pytest.mark.parametrize(
    "text",
    [
        "The meeting is at 10:30:00 on 2026-11-23.",
        "Order 4111 1111 1111 1112 failed the checksum.",  # not Luhn-valid
        "GB00 WEST 1234 5698 7654 32 has wrong check digits.",
        "Version 999.1.2 and room 12-34.",
        "This is Monday, call me Tomorrow.",
        "",
    ],
)
def test_lookalikes_are_left_alone(text: str) -> None:
    result = anonymise(text)
    assert result.text == text and not result.changed


def test_a_name_found_once_or_known_is_replaced_everywhere() -> None:
    first = anonymise("Hi, I am called Maria Lopes.")
    assert first.names == {"Maria Lopes"}
    later = anonymise("Maria Lopes asked Bruno about it; Bruno agreed.", known_names=first.names | {"Bruno"})
    assert later.text == "[PERSON] asked [PERSON] about it; [PERSON] agreed."
    assert later.counts == {"person": 3}


@pytest.mark.parametrize(
    ("text", "expected", "names"),
    [
        ("Kind regards, Dr. Ana Souza", "Kind regards, Dr. [PERSON]", {"Ana Souza"}),
        ("Prof Dr Anna Weber wrote", "Prof Dr [PERSON] wrote", {"Anna Weber"}),
        ("Mr Smith Dr Jones met", "Mr [PERSON] Dr [PERSON] met", {"Smith", "Jones"}),
        ("Mrs Mrsova called", "Mrs [PERSON] called", {"Mrsova"}),
        ("Mr " * 30, "Mr " * 30, set()),
        ("Thanks,\nMr. Ross Geller", "Thanks,\nMr. [PERSON]", {"Ross Geller"}),
        (
            "CALL ME Ana, then call me Bea. ThisIs Carl",
            "CALL ME Ana, then call me [PERSON]. ThisIs Carl",
            {"Bea"},
        ),
    ],
)
def test_an_honorific_is_a_cue_never_a_word_of_the_name(text: str, expected: str, names: set[str]) -> None:
    result = anonymise(text)
    assert (result.text, result.names) == (expected, names)


def test_overlapping_detections_keep_one_placeholder() -> None:
    result = anonymise("mail bob@10.0.0.1.example.com or 4111111111111111")
    assert result.text == "mail [EMAIL] or [CREDIT_CARD]"


@pytest.mark.parametrize("repeats", [1, 40])
def test_a_name_that_repeats_is_replaced_as_one_that_occurs_once(repeats: int) -> None:
    """A first word that starts many names is matched by a compiled expression instead of walked
    (core/text/pii.py, _NameIndex); either way every occurrence is replaced, the longest name at a
    position wins, and a name that starts inside a span another detector kept is still found."""
    known = {"Ana Souza", "Souza Lima", "Ana"}
    unit = "Ana Souza met Ana. bob@x.Ana Souza Lima left. "
    result = anonymise(unit * repeats, known_names=known)
    assert result.text == "[PERSON] met [PERSON]. [EMAIL] [PERSON] left. " * repeats
    assert result.counts == {"person": 3 * repeats, "email": repeats}
