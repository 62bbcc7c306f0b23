"""Shared API base: strict serializers and fields, request parsers, throttling, the error middleware,
OpenAPI extensions."""
