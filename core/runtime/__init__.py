"""Runtime services: the managed Neo4j/Redis processes, the HTTP thread pool, the Redis client, heap
tuning."""
