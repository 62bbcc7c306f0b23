"""Document metadata: scalar values under simple keys, stored so that equality filters work in Cypher.

A document keeps its metadata twice: as JSON (`metadata_json`, returned as given) and as a list of
`key=value` strings (`meta_kv`) that a search filter matches with `$pair IN d.meta_kv`. Values are
encoded as JSON so that the string "1" and the number 1 stay different, and 1 and 1.0 stay equal.
"""

from __future__ import annotations

import json
import re
from typing import Any

KEY_PATTERN = re.compile(r"^[A-Za-z_][A-Za-z0-9_.\-]{0,63}$")
KEY_RULE = "keys are 1-64 characters: a letter or _ first, then letters, digits, _ . -"
MAX_KEYS = 50
MAX_VALUE_CHARS = 1000

Scalar = str | int | float | bool | None


def is_valid_key(key: str) -> bool:
    return bool(KEY_PATTERN.match(key))


def metadata_errors(metadata: dict[str, Any]) -> list[str]:
    """Why `metadata` cannot be stored or used as a filter (empty when it can)."""
    errors = []
    if len(metadata) > MAX_KEYS:
        errors.append(f"at most {MAX_KEYS} keys")
    for key, value in metadata.items():
        if not isinstance(key, str) or not is_valid_key(key):
            errors.append(f"invalid key {str(key)[:80]!r}: {KEY_RULE}")
        elif value is not None and not isinstance(value, str | int | float | bool):
            errors.append(f"value of {key!r} must be a string, number, boolean or null")
        elif isinstance(value, str) and len(value) > MAX_VALUE_CHARS:
            errors.append(f"value of {key!r} is longer than {MAX_VALUE_CHARS} characters")
        elif isinstance(value, float) and value != value:  # NaN never equals anything
            errors.append(f"value of {key!r} is not a number")
    return errors


def _canonical(value: Scalar) -> Scalar:
    if isinstance(value, float) and not isinstance(value, bool) and value.is_integer():
        return int(value)
    return value


def encode_pair(key: str, value: Scalar) -> str:
    return f"{key}={json.dumps(_canonical(value), ensure_ascii=False, sort_keys=True)}"


def encode_pairs(metadata: dict[str, Scalar]) -> list[str]:
    return sorted(encode_pair(k, v) for k, v in metadata.items())
