"""The one id rule of the sessions API, for app names, user ids and session ids.

- An id is 1-256 characters without NUL; any other character is allowed (`/`, `..`, spaces, Cypher or
  Lucene syntax, any script).
- A session id is trimmed of surrounding whitespace wherever it is given (create, read, append,
  delete, memory), as ADK's own session services do; a blank one at create time means "generate one".
  App names and user ids are kept exactly as given.
- In a URL path an id is one percent-encoded segment. An id that a path segment cannot carry as it is
  (one containing `/`, one that is `.` or `..`, an empty one) or that starts with `~` is sent as `~`
  followed by the unpadded base64url of its UTF-8 bytes. The platform's clients do this for every id
  they put in a path, so every id round-trips.
"""

from __future__ import annotations

import base64
import binascii

from core.errors import InvalidInput

MAX_ID_CHARS = 256
ESCAPE = "~"


def checked(value: str, field: str) -> str:
    """`value` if it is 1-256 characters without NUL, else InvalidInput naming the rule."""
    if not value or len(value) > MAX_ID_CHARS or "\x00" in value:
        raise InvalidInput(
            f"{field} must be 1-{MAX_ID_CHARS} characters without NUL (see docs/sessions.md, Ids)",
            details={"field": field},
        )
    return value


def session_id_given(value: str | None) -> str | None:
    """A session id as given at create time: trimmed; None (generate one) when blank or absent."""
    if value is None:
        return None
    value = value.strip()
    return checked(value, "session_id") if value else None


def from_path(segment: str, field: str) -> str:
    """The id a (percent-decoded) path segment carries, checked; session ids are trimmed."""
    value = segment
    if segment.startswith(ESCAPE):
        encoded = segment[len(ESCAPE) :]
        try:
            value = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode("utf-8")
        except (binascii.Error, ValueError) as exc:
            raise InvalidInput(
                f"{field} starts with {ESCAPE!r} but the rest is not base64url of UTF-8 "
                "(see docs/sessions.md, Ids)",
                details={"field": field},
            ) from exc
    if field == "session_id":
        value = value.strip()
    return checked(value, field)
