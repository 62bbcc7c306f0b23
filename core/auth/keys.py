"""API-key authentication, scopes and project tenancy for DRF views and websockets."""

from __future__ import annotations

import hmac
import logging
import re
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser
from django.db import transaction
from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from core.models import ApiKey
from core.runtime.redis_client import get_redis

logger = logging.getLogger(__name__)

KEY_RE = re.compile(r"^kp_([0-9a-f]{8})_([A-Za-z0-9]{20,64})$")
LAST_USED_RESOLUTION = timedelta(minutes=1)

# Each process keeps the key rows it has read, each with the key epoch (a Redis value) it was read
# under; a row is used again only while the epoch is unchanged and it is younger than
# AUTH_KEY_CACHE_SEC. Every change to a key through the ORM, the admin or core.services sets a new
# epoch, before and again after its commit, so every process sees a revocation on its next request;
# a row changed behind the ORM's back (raw SQL) is read again within AUTH_KEY_CACHE_SEC. Without an
# epoch (Redis down or not read) the row is always read from the database.
KEY_EPOCH = "auth:key-epoch"
_KEPT_MAX = 10_000
_kept: dict[str, tuple[str, float, ApiKey]] = {}  # prefix -> (epoch, read at (monotonic s), row)


def keys_changed() -> None:
    """A key row is changing: set a new epoch now (so no process keeps using what it read) and
    again once the transaction commits (so no process keeps what it read before the commit)."""
    _new_epoch()
    transaction.on_commit(_new_epoch, robust=True)


def _new_epoch() -> None:
    try:
        get_redis().set(KEY_EPOCH, f"{time.time_ns()}-{uuid.uuid4().hex[:8]}")
    except Exception as exc:  # noqa: BLE001 - kept rows still expire after AUTH_KEY_CACHE_SEC
        logger.warning("could not set a new API-key epoch: %s", exc)


def key_epoch_initial(value: bytes | str | None) -> str | None:
    """The epoch read from Redis; when none is set yet, one is set (first writer wins) and the
    request at hand reads the database."""
    if value is not None:
        return value.decode() if isinstance(value, bytes) else value
    try:
        get_redis().set(KEY_EPOCH, f"{time.time_ns()}-{uuid.uuid4().hex[:8]}", nx=True)
    except Exception as exc:  # noqa: BLE001
        logger.warning("could not set the API-key epoch: %s", exc)
    return None


def _key_row(prefix: str, epoch: str | None) -> ApiKey | None:
    ttl = settings.AUTH_KEY_CACHE_SEC
    if epoch is not None and ttl > 0:
        kept = _kept.get(prefix)
        if kept is not None and kept[0] == epoch and time.monotonic() - kept[1] < ttl:
            return kept[2]
    read_at = time.monotonic()
    key = ApiKey.objects.filter(prefix=prefix).first()
    if key is not None and epoch is not None and ttl > 0:
        if len(_kept) >= _KEPT_MAX:
            _kept.clear()
        _kept[prefix] = (epoch, read_at, key)
    return key


def key_lookup(raw_key: str, epoch: str | None = None) -> ApiKey | None:
    """The active ApiKey for a presented key string, or None (malformed, unknown, wrong, revoked).
    `epoch`: the key epoch read from Redis for this request (see above); None reads the database."""
    match = KEY_RE.match(raw_key.strip())
    if not match:
        return None
    prefix, secret = match.groups()
    key = _key_row(prefix, epoch)
    if key is None or not hmac.compare_digest(key.secret_hash, ApiKey.hash_secret(secret)):
        return None
    if key.is_revoked:
        return None
    now = timezone.now()
    if key.last_used_at is None or now - key.last_used_at > LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
    return key


@dataclass(frozen=True)
class KeyUser:
    """The request user of an API-key request (no Django user behind it)."""

    api_key: ApiKey
    is_authenticated: bool = True
    is_anonymous: bool = False
    is_staff: bool = False
    is_superuser: bool = False

    @property
    def pk(self) -> str:
        return f"key:{self.api_key.pk}"

    def __str__(self) -> str:
        return f"api-key {self.api_key.prefix}"


class ApiKeyAuthentication(BaseAuthentication):
    """`Authorization: Bearer kp_…`. A missing header leaves the request anonymous."""

    keyword = b"bearer"

    def authenticate(self, request: Request) -> tuple[KeyUser, ApiKey] | None:
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != self.keyword:
            return None
        if len(parts) != 2:
            raise exceptions.AuthenticationFailed("malformed Authorization header; use 'Bearer <key>'")
        # read by ProbeThrottleMiddleware in the same Redis round trip as the probe counters
        key = key_lookup(parts[1].decode("latin-1"), getattr(request, "key_epoch", None))
        if key is None:
            raise exceptions.AuthenticationFailed("invalid, unknown or revoked API key")
        return KeyUser(api_key=key), key

    def authenticate_header(self, request: Request) -> str:
        return 'Bearer realm="api"'


def request_api_key(request: Request) -> ApiKey | None:
    return request.auth if isinstance(request.auth, ApiKey) else None


def request_project_id(request: Request) -> str | None:
    """The project a key is bound to; None for staff sessions (which see every project)."""
    key = request_api_key(request)
    return key.project_id if key is not None else None


def is_staff(request: Request) -> bool:
    user = request.user
    return bool(user and not isinstance(user, AnonymousUser) and getattr(user, "is_staff", False))


# A staff session holds an API scope through a Django permission on Project; a scope is granted by
# its own permission or by one that implies it (admin > write > read). Superusers hold them all.
SCOPE_PERMISSIONS = {
    "read": ("core.api_read", "core.api_write", "core.api_admin"),
    "write": ("core.api_write", "core.api_admin"),
    "admin": ("core.api_admin",),
}


def staff_may(request: Request, permissions: tuple[str, ...]) -> bool:
    """Whether the request is a staff session holding any of `permissions`."""
    return is_staff(request) and any(request.user.has_perm(p) for p in permissions)


def needed_scope(request: Request, view: Any) -> str:
    return getattr(view, "required_scope", None) or ("read" if request.method in SAFE_METHODS else "write")


def mark_probe(request: Request, reason: str) -> None:
    """Record on the underlying HttpRequest that this request tried something it may not do; the
    abuse throttle (core.api.middleware.ProbeThrottleMiddleware) counts such requests."""
    django_request = getattr(request, "_request", request)
    django_request.probe_reason = reason


class HasScope(BasePermission):
    """Safe methods need `read`, others `write`; a view may demand more with `required_scope`.

    An API key needs the scope. A staff session needs the matching Django permission (`core.api_read`,
    `core.api_write`, `core.api_admin`) or, where the view names one, its own `staff_permission`
    (for example `core.add_project` to create projects); being staff alone grants nothing.
    """

    message = "this API key lacks the scope this operation needs"

    def has_permission(self, request: Request, view: Any) -> bool:
        needed = needed_scope(request, view)
        key = request_api_key(request)
        if key is None:
            if not is_staff(request):
                return False
            own = getattr(view, "staff_permission", None)
            permissions = (own,) if isinstance(own, str) else SCOPE_PERMISSIONS[needed]
            if staff_may(request, permissions):
                return True
            self.message = f"this user lacks the permission this operation needs ({' or '.join(permissions)})"
            mark_probe(request, "permission")
            return False
        if not key.has_scope(needed):
            self.message = f"this API key lacks the '{needed}' scope"
            mark_probe(request, "scope")
            return False
        return True


class ProjectAccess(BasePermission):
    """A key only sees its own project: any other project id answers 404, as if it did not exist.
    Staff sessions reach every project (what they may do there is HasScope's question)."""

    def has_permission(self, request: Request, view: Any) -> bool:
        project_id = view.kwargs.get("project_id")
        if project_id is None or is_staff(request):
            return True
        key = request_api_key(request)
        if key is None or key.project_id != project_id:
            if key is not None:
                mark_probe(request, "foreign_project")
            raise exceptions.NotFound("project not found")
        return True
