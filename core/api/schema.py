"""OpenAPI extensions for drf-spectacular: how the schema describes the platform's own classes."""

from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension, OpenApiSerializerExtension


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    """`core.auth.keys.ApiKeyAuthentication`: an API key as a bearer token (`Authorization: Bearer kp_…`)."""

    target_class = "core.auth.keys.ApiKeyAuthentication"
    name = "apiKey"

    def get_security_definition(self, auto_schema: Any) -> dict[str, str]:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "A project API key (`kp_…`), issued by `manage.py create_api_key` or the admin",
        }


class StrictSerializerExtension(OpenApiSerializerExtension):
    """`retrieval.apis.StrictSerializer` and its subclasses refuse unknown fields (400): the schema
    says so with `additionalProperties: false`, so clients and schema-driven tests know it."""

    target_class = "retrieval.apis.StrictSerializer"
    match_subclasses = True

    def map_serializer(self, auto_schema: Any, direction: Any) -> dict[str, Any]:
        schema: dict[str, Any] = auto_schema._map_basic_serializer(self.target, direction)
        schema["additionalProperties"] = False
        return schema
