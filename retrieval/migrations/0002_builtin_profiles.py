"""The two shipped enrichment profiles. Their text is checked against Neo4j (EXPLAIN) by the tests;
a later change of a built-in profile comes as a new migration that adds a version."""

from django.db import migrations

DOCUMENT_CONTEXT = """\
MATCH (doc:Document {id: node.document_id})
WHERE doc.project_id = node.project_id
OPTIONAL MATCH (previous:Chunk)-[:NEXT_CHUNK]->(node)
OPTIONAL MATCH (node)-[:NEXT_CHUNK]->(following:Chunk)
RETURN coalesce(previous.text + '\\n', '') + node.text + coalesce('\\n' + following.text, '') AS text,
       score,
       doc.title AS document_title,
       node.index AS chunk_index
ORDER BY score DESC"""

ENTITY_NEIGHBOURHOOD = """\
OPTIONAL MATCH (node)-[:HAS_ENTITY]->(entity:Entity)
WITH node, score, entity ORDER BY entity.name
WITH node, score, collect(entity)[0..10] AS entities
CALL (entities) {
  UNWIND entities AS entity
  MATCH (entity)-[rel:RELATED]-(other:Entity)
  WITH entity, other, CASE WHEN coalesce(rel.description, '') = '' THEN '' ELSE ': ' + rel.description END AS about
       ORDER BY rel.weight DESC, other.name
  RETURN collect(entity.name + ' - ' + other.name + about)[0..15] AS relations,
         collect(DISTINCT other.name)[0..15] AS related_entities
}
RETURN node.text AS text,
       score,
       [e IN entities | e.name + coalesce(' (' + e.type + ')', '')] AS entities,
       related_entities,
       relations
ORDER BY score DESC"""

BUILTIN = [
    (
        "document_context",
        "The chunk with its neighbours (previous and next chunk) and its document's title.",
        DOCUMENT_CONTEXT,
        ["text", "score", "document_title", "chunk_index"],
    ),
    (
        "entity_neighbourhood",
        "The chunk's entities and their directly related entities, with relation descriptions.",
        ENTITY_NEIGHBOURHOOD,
        ["text", "score", "entities", "related_entities", "relations"],
    ),
]


def install(apps, schema_editor):
    Profile = apps.get_model("retrieval", "RetrievalProfile")
    Version = apps.get_model("retrieval", "RetrievalProfileVersion")
    for name, description, query, columns in BUILTIN:
        profile, created = Profile.objects.get_or_create(
            name=name,
            defaults={
                "description": description,
                "retrieval_query": query,
                "columns": columns,
                "version": 1,
                "builtin": True,
                "updated_by": "builtin",
            },
        )
        if created:
            Version.objects.create(
                profile=profile, version=1, retrieval_query=query, columns=columns, created_by="builtin"
            )


def uninstall(apps, schema_editor):
    apps.get_model("retrieval", "RetrievalProfile").objects.filter(builtin=True).delete()


class Migration(migrations.Migration):
    dependencies = [("retrieval", "0001_initial")]
    operations = [migrations.RunPython(install, uninstall)]
