"""The platform connection a service uses: given, or opened from settings (and then owned)."""

from __future__ import annotations

from typing import Any

from knowledge_platform_client import AsyncPlatformClient, PlatformSettings, SessionsClient


class _Connected:
    def __init__(
        self,
        client: AsyncPlatformClient | None = None,
        settings: PlatformSettings | None = None,
        **overrides: Any,
    ) -> None:
        self._owns_client = client is None
        self.client = client or AsyncPlatformClient(settings, **overrides)
        self.sessions = SessionsClient(self.client)

    async def aclose(self) -> None:
        """Close the HTTP client if this service opened it."""
        if self._owns_client:
            await self.client.aclose()

    async def __aenter__(self) -> Any:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
