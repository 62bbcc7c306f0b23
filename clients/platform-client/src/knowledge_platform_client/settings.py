"""Connection settings, from arguments or the environment (`KNOWLEDGE_PLATFORM_*`)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, SecretStr, ValidationError, field_validator

ENV_PREFIX = "KNOWLEDGE_PLATFORM_"


class ConfigurationError(ValueError):
    """Settings are missing or invalid; the message names the environment variables to fix."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("knowledge platform settings: " + "; ".join(problems))
        self.problems = problems


def env_name(field: str) -> str:
    """The environment variable of a settings field (`api_key` -> `KNOWLEDGE_PLATFORM_API_KEY`)."""
    return f"{ENV_PREFIX}{field.upper()}"


class PlatformSettings(BaseModel):
    """Where the platform is and who we are to it.

    `url` is the platform's base address (`http://localhost:8000`); `api_key` a project key;
    `project_id` the project every call addresses. Requests time out after `timeout` seconds; a 429,
    502, 503 or 504 answer (or a refused connection) is retried up to `max_retries` times, waiting as
    long as the platform's `Retry-After` says, or backing off exponentially from `backoff` seconds.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    url: str = Field(min_length=1)
    api_key: SecretStr
    project_id: str = Field(min_length=1)
    timeout: float = Field(default=30.0, gt=0)
    max_retries: int = Field(default=4, ge=0, le=20)
    backoff: float = Field(default=0.5, ge=0)
    max_wait: float = Field(default=30.0, gt=0)

    @field_validator("url")
    @classmethod
    def _http_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError("url must start with http:// or https://")
        return value.rstrip("/")

    @field_validator("api_key")
    @classmethod
    def _key_given(cls, value: SecretStr) -> SecretStr:
        if not value.get_secret_value().strip():
            raise ValueError("api_key must not be empty")
        return value

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, **overrides: Any) -> PlatformSettings:
        """Settings from `KNOWLEDGE_PLATFORM_URL`, `_API_KEY`, `_PROJECT_ID`, `_TIMEOUT`,
        `_MAX_RETRIES`, `_BACKOFF` and `_MAX_WAIT`; keyword arguments win over the environment."""
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for name in cls.model_fields:
            raw = env.get(env_name(name))
            if raw is not None and raw != "":
                values[name] = raw
        values.update({k: v for k, v in overrides.items() if v is not None})
        try:
            return cls.model_validate(values)
        except ValidationError as exc:
            raise ConfigurationError(_problems(exc)) from None


def _problems(exc: ValidationError) -> list[str]:
    """One line per bad field, naming its variable and never echoing a value (it may be the key)."""
    problems = []
    for error in exc.errors(include_input=False, include_url=False):
        field = str(error["loc"][0]) if error["loc"] else ""
        if field in PlatformSettings.model_fields:
            where = f"{env_name(field)} (or the `{field}` argument)"
        else:
            where = f"unknown setting `{field}`"
        reason = "is not set" if error["type"] == "missing" else f"is invalid: {error['msg']}"
        problems.append(f"{where} {reason}")
    return problems
