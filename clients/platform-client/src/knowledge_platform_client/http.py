"""The async HTTP core: authentication, project paths, error mapping and retries."""

from __future__ import annotations

import base64
import email.utils
import logging
import time
from collections.abc import Iterable
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt

from knowledge_platform_client.errors import PlatformError, UnavailableError, error_for
from knowledge_platform_client.settings import PlatformSettings

RETRY_STATUSES = frozenset({429, 502, 503, 504})
log = logging.getLogger("knowledge_platform_client")


class _Retryable(Exception):
    """A 429/5xx answer or a transport failure worth another attempt."""

    def __init__(self, error: PlatformError, retry_after: float | None) -> None:
        super().__init__(str(error))
        self.error = error
        self.retry_after = retry_after


def retry_after_seconds(value: str | None, now: float | None = None) -> float | None:
    """`Retry-After` as seconds: a number of seconds or an HTTP date; None when absent or unreadable."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def segment(value: str) -> str:
    """One path segment, whatever characters the name has."""
    return quote(value, safe="")


def path_id(value: str) -> str:
    """A caller-chosen id (app, user, session) as the platform's id rule puts it in a path: as it is,
    unless a path segment cannot carry it (it holds `/`, is `.`, `..` or empty) or it starts with `~`;
    then `~` and the unpadded base64url of its UTF-8 bytes. `segment` percent-encodes the result."""
    if "/" in value or value in ("", ".", "..") or value.startswith("~"):
        return "~" + base64.urlsafe_b64encode(value.encode()).decode().rstrip("=")
    return value


class AsyncPlatformClient:
    """One connection pool to the platform for one project. Use `async with`, or call `aclose()`.

    `request` returns the decoded JSON body (None for 204) and raises the `errors` module's exceptions
    for 4xx answers; 429/502/503/504 answers and connection failures are retried as the settings say.
    """

    def __init__(self, settings: PlatformSettings | None = None, **overrides: Any) -> None:
        self.settings = settings or PlatformSettings.from_env(**overrides)
        self._http = httpx.AsyncClient(
            base_url=self.settings.url,
            headers={
                "Authorization": f"Bearer {self.settings.api_key.get_secret_value()}",
                "User-Agent": "knowledge-platform-client/0.1",
            },
            timeout=self.settings.timeout,
        )

    async def __aenter__(self) -> AsyncPlatformClient:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    @property
    def closed(self) -> bool:
        return self._http.is_closed

    def project_path(self, *parts: str) -> str:
        """`/api/v1/projects/{project}` followed by `parts`, each quoted as one segment."""
        base = f"/api/v1/projects/{segment(self.settings.project_id)}"
        return "/".join([base, *(segment(p) for p in parts)])

    def _wait(self, state: RetryCallState) -> float:
        error = state.outcome.exception() if state.outcome else None
        retry_after = error.retry_after if isinstance(error, _Retryable) else None
        if retry_after is not None:
            return min(retry_after, self.settings.max_wait)
        return min(self.settings.backoff * (2 ** (state.attempt_number - 1)), self.settings.max_wait)

    def _log_retry(self, state: RetryCallState) -> None:
        error = state.outcome.exception() if state.outcome else None
        wait = state.next_action.sleep if state.next_action else 0.0
        log.warning("platform answered %s; retry %d in %.2f s", error, state.attempt_number, wait)

    async def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        ok: Iterable[int] = (200, 201, 202, 204),
        retry_statuses: bool = True,
    ) -> Any:
        """`retry_statuses=False`: a 429 or 5xx answer is raised at once (a refused connection, which
        nothing can have applied, is still retried): for writes that must not be repeated."""
        accepted = frozenset(ok)
        query = {k: v for k, v in (params or {}).items() if v is not None}
        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.settings.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(lambda e: isinstance(e, _Retryable)),
            before_sleep=self._log_retry,
            reraise=True,
        )
        try:
            async for attempt in retrying:
                with attempt:
                    return await self._once(method, path, json, query, headers, accepted, retry_statuses)
        except _Retryable as exhausted:
            raise exhausted.error from None
        raise AssertionError("unreachable: tenacity either returns or raises")  # pragma: no cover

    async def _once(
        self,
        method: str,
        path: str,
        body: Any,
        params: dict[str, Any],
        headers: dict[str, str] | None,
        accepted: frozenset[int],
        retry_statuses: bool = True,
    ) -> Any:
        try:
            response = await self._http.request(
                method, path, json=body, params=params or None, headers=headers
            )
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as exc:
            raise _Retryable(UnavailableError(0, "unreachable", str(exc)), None) from exc
        except httpx.TimeoutException as exc:
            # the request may have been applied: not retried, so a write is never doubled
            raise UnavailableError(0, "timeout", str(exc)) from exc
        if response.status_code in accepted:
            if response.status_code == 204 or not response.content:
                return None
            return response.json()
        try:
            payload: Any = response.json()
        except ValueError:
            payload = response.text
        error = error_for(response.status_code, payload)
        if retry_statuses and response.status_code in RETRY_STATUSES:
            raise _Retryable(error, retry_after_seconds(response.headers.get("Retry-After")))
        raise error
