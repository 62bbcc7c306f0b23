"""The benchmarks of `make bench` (bench/run.py)."""

from __future__ import annotations

import os


def django_setup() -> None:
    """Django configured in the bench process itself (for what a benchmark measures in process)."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
