"""The API's JSON parser (orjson) against DRF's strict contract."""

from __future__ import annotations

import io

import pytest
from rest_framework.exceptions import ParseError

from core.api.parsers import FastJSONParser

pytestmark = pytest.mark.unit


def _parse(raw: bytes, encoding: str | None = None) -> object:
    context = {"encoding": encoding} if encoding else {}
    return FastJSONParser().parse(io.BytesIO(raw), "application/json", context)


def test_utf8_bodies_parse_as_python_json_would() -> None:
    raw = '{"text": "ünïcode 🙂", "n": [1, -2.5, 1e-7, 18446744073709551615], "ok": true, "none": null}'
    assert _parse(raw.encode()) == {
        "text": "ünïcode 🙂",
        "n": [1, -2.5, 1e-7, 18446744073709551615],
        "ok": True,
        "none": None,
    }


@pytest.mark.parametrize(
    "raw", [b"[NaN]", b"[Infinity]", b"[-Infinity]", b"[1e999]", b'["\\ud800"]', b"{", b"", b"\xff\xfe"]
)
def test_what_strict_json_refuses_is_a_parse_error(raw: bytes) -> None:
    with pytest.raises(ParseError, match="JSON parse error"):
        _parse(raw)


def test_another_charset_goes_to_drfs_parser() -> None:
    assert _parse('{"name": "café"}'.encode("latin-1"), "latin-1") == {"name": "café"}
    assert _parse('{"name": "café"}'.encode(), "UTF8") == {"name": "café"}
