"""Source-path globs become anchored regular expressions with every character literal but the
wildcards (the caller never supplies a regex)."""

from __future__ import annotations

import pytest

from core.errors import InvalidInput
from knowledge.selectors import glob_pattern

pytestmark = pytest.mark.unit


def test_glob_translation_is_literal_except_wildcards() -> None:
    assert glob_pattern("docs/*.md") == ("docs/", r"(?s)docs/[^/]*\.md")
    assert glob_pattern("a/**/b?") == ("a/", "(?s)a/.*/b[^/]")
    assert glob_pattern("x.^$+{}[]()|y") == ("x.^$+{}[]()|y", r"(?s)x\.\^\$\+\{\}\[\]\(\)\|y")


@pytest.mark.parametrize("glob", ["a/../b", "**/../*", "..", "", "a" * 501, "a\x00b"])
def test_globs_that_could_escape_or_overflow_are_refused(glob: str) -> None:
    with pytest.raises(InvalidInput):
        glob_pattern(glob)
