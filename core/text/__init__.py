"""Text utilities: PII detection and replacement, metadata key/value encoding."""
