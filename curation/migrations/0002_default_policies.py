"""Seed 003's pruning rules and the conversations' own privacy settings as default policies
(for every project; curators edit or disable them in the admin)."""

from django.db import migrations

DEFAULTS = [
    ("Conversation privacy settings: expired conversations", "expired_conversations", None, "delete"),
    ("Conversation turns older than 90 days condensed to summaries", "messages", 90, "summarise_then_delete"),
    ("Orphaned entities without references for 180 days pruned", "orphaned_entities", 180, "delete"),
]


def create(apps, schema_editor):
    policy = apps.get_model("curation", "RetentionPolicy")
    for name, kind, age_days, action in DEFAULTS:
        policy.objects.get_or_create(name=name, defaults={"kind": kind, "age_days": age_days, "action": action})


def remove(apps, schema_editor):
    apps.get_model("curation", "RetentionPolicy").objects.filter(name__in=[d[0] for d in DEFAULTS]).delete()


class Migration(migrations.Migration):
    dependencies = [("curation", "0001_initial")]
    operations = [migrations.RunPython(create, remove)]
