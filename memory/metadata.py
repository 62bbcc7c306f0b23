"""A caller's free metadata on a memory message (issue 34, item 5): the rules it follows, how it is
stored on the Memory node, read back and filtered on.

Metadata is a flat JSON object. Its keys match `KEY_PATTERN`; its values are strings (no NUL), finite
numbers (integers of 64 bits), booleans or lists of strings; at most `MAX_KEYS` keys, `MAX_STRING_CHARS`
characters per string (alone or in a list), `MAX_LIST_ITEMS` strings per list. Neo4j properties cannot
hold maps, so each key is stored as its own property, `cypher.METADATA_PREFIX` + key (no other property
of a message starts with it), and the keys, in the order given, as the list `cypher.METADATA_KEYS`:
what is read back is what was stored. A search filter (`MessageFilters.metadata`) names keys with one
string, number or boolean each.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from core.errors import InvalidInput
from memory import cypher

KEY_PATTERN = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")
MAX_KEYS = 16
MAX_STRING_CHARS = 1_000
MAX_LIST_ITEMS = 32
_INT64 = (-(2**63), 2**63 - 1)  # Neo4j's integers

Scalar = str | int | float | bool
Value = Scalar | list[str]


def _fail(field: str, message: str) -> InvalidInput:
    return InvalidInput(f"{field}: {message}", details={"field": field})


def key_check(key: Any, *, field: str) -> str:
    """`key` when it is a metadata key (`KEY_PATTERN`); 400 otherwise."""
    if not isinstance(key, str) or KEY_PATTERN.fullmatch(key) is None:
        raise _fail(
            field,
            f"key {str(key)[:70]!r} must start with a letter and hold 1..64 letters, digits or underscores",
        )
    return key


def _scalar_check(value: Any, *, field: str) -> Scalar:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        if len(value) > MAX_STRING_CHARS:
            raise _fail(field, f"a string holds at most {MAX_STRING_CHARS} characters; got {len(value)}")
        if "\x00" in value:  # as the API's other text fields (DRF's CharField)
            raise _fail(field, "a string may not hold NUL characters")
        return value
    if isinstance(value, int):
        if not _INT64[0] <= value <= _INT64[1]:
            raise _fail(field, "an integer must fit in 64 bits")
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _fail(field, "a number must be finite")
        return value
    kind = "null" if value is None else "an object" if isinstance(value, Mapping) else type(value).__name__
    raise _fail(field, f"a value is a string, a number or a boolean, not {kind}")


def _value_check(value: Any, *, field: str) -> Value:
    if not isinstance(value, list):
        return _scalar_check(value, field=field)
    if len(value) > MAX_LIST_ITEMS:
        raise _fail(field, f"a list holds at most {MAX_LIST_ITEMS} strings; got {len(value)}")
    for i, item in enumerate(value):
        if not isinstance(item, str):
            raise _fail(f"{field}[{i}]", "a list holds strings only")
        _scalar_check(item, field=f"{field}[{i}]")
    return list(value)


def _object_check(value: Any, *, field: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise _fail(field, "must be a JSON object of keys and values")
    if len(value) > MAX_KEYS:
        raise _fail(field, f"at most {MAX_KEYS} keys; got {len(value)}")
    for key in value:
        key_check(key, field=field)
    return value


def metadata_check(value: Any, *, field: str = "metadata") -> dict[str, Value]:
    """A message's metadata as stored: a flat object of keys and values (see the module); 400 naming
    `field` (and the key) otherwise."""
    return {
        key: _value_check(item, field=f"{field}.{key}")
        for key, item in _object_check(value, field=field).items()
    }


def filter_check(value: Any, *, field: str = "metadata") -> tuple[tuple[str, Scalar], ...]:
    """A search's metadata filter: keys (as `metadata_check`'s) with one string, number or boolean
    each, which a message's value must equal (or, for a list, hold); 400 naming `field` otherwise."""
    return tuple(
        (key, _scalar_check(item, field=f"{field}.{key}"))
        for key, item in _object_check(value, field=field).items()
    )


def stored_properties(metadata: Mapping[str, Value] | None) -> dict[str, Value]:
    """The Memory node's properties holding `metadata` (each key under `cypher.METADATA_PREFIX`)."""
    return {cypher.METADATA_PREFIX + key: value for key, value in (metadata or {}).items()}


def stored_keys(metadata: Mapping[str, Value] | None) -> list[str] | None:
    """The node's `cypher.METADATA_KEYS` list: the keys in the order given (None: no metadata)."""
    return list(metadata) if metadata else None


def filter_params(pairs: Iterable[tuple[str, Scalar]]) -> list[dict[str, Any]]:
    """`$filter_metadata` of `cypher.METADATA_FILTER`: each key's property (the key checked again
    here: a property name is only ever built from a valid key) and the value it must hold."""
    return [
        {"property": cypher.METADATA_PREFIX + key_check(key, field="metadata"), "value": value}
        for key, value in pairs
    ]


def from_pairs(pairs: Iterable[Sequence[Any]] | None) -> dict[str, Value]:
    """A message's metadata from the [key, value] pairs a read returns (`cypher.METADATA_PAIRS`)."""
    return {key: value for key, value in pairs or () if value is not None}


def anonymised(pairs: Iterable[Sequence[Any]] | None) -> tuple[dict[str, None], list[str] | None]:
    """What anonymising a message does to its metadata: every string and list of strings goes (a
    string may name or reach a person, and out of context no detector can tell; the author's name
    is replaced outright for the same reason); numbers and booleans stay. Returns the properties to
    remove (as nulls for `SET m += …`) and the keys kept (None: none)."""
    kept: list[str] = []
    removed: dict[str, None] = {}
    for key, value in pairs or ():
        if isinstance(value, str | list):
            removed[cypher.METADATA_PREFIX + key] = None
        elif value is not None:
            kept.append(key)
    return removed, kept or None
