"""Model signals of the core app: a changed API key is read again by every process (a new key epoch),
and a revoked or deleted one closes its open websockets."""

from __future__ import annotations

import logging
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver

from core.auth.keys import keys_changed
from core.auth.websocket import key_group
from core.models import ApiKey

logger = logging.getLogger(__name__)


def key_sockets_close(*, prefix: str) -> None:
    """After commit: tell every socket opened with this key to close (best effort; the sockets also
    re-check their key every WS_KEY_RECHECK_SEC)."""

    def send() -> None:
        try:
            layer = get_channel_layer()
            if layer is not None:
                async_to_sync(layer.group_send)(key_group(prefix), {"type": "key.revoked"})
        except Exception as exc:  # noqa: BLE001 - the periodic re-check still closes them
            logger.warning("could not notify the sockets of revoked key %s: %s", prefix, exc)

    transaction.on_commit(send, robust=True)


@receiver(post_save, sender=ApiKey, dispatch_uid="core.apikey.revoked")
def _key_saved(sender: Any, instance: ApiKey, created: bool, **kwargs: Any) -> None:
    keys_changed()
    if instance.revoked_at is not None:
        key_sockets_close(prefix=instance.prefix)


@receiver(post_delete, sender=ApiKey, dispatch_uid="core.apikey.deleted")
def _key_deleted(sender: Any, instance: ApiKey, **kwargs: Any) -> None:
    keys_changed()
    key_sockets_close(prefix=instance.prefix)
