"""The base of the API's answer models: unknown fields are ignored, so a newer platform that adds
fields does not break an older client."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class ApiModel(BaseModel):
    model_config = ConfigDict(extra="ignore")
