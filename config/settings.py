"""Settings: the environment is read here, once, and nowhere else (apps read django.conf.settings).

Every variable is listed with its default in .env.example and in the README's configuration table.
"""

from __future__ import annotations

import logging
from pathlib import Path

import environ
from django.core.exceptions import ImproperlyConfigured

from core.auth.secrets import MIN_SECRET_KEY_CHARS, PUBLIC_SECRET_KEYS, install_secret

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
# A .env file in the repository root is optional; real environment variables win over it.
if (BASE_DIR / ".env").is_file():
    env.read_env(BASE_DIR / ".env", overwrite=False)

VAR_DIR = Path(env.str("VAR_DIR", default=str(BASE_DIR / "var"))).resolve()

# --- Django core ------------------------------------------------------------------------------
DEBUG = env.bool("DJANGO_DEBUG", default=False)
# Unset: a key generated on first start and kept in VAR_DIR/secret_key (mode 0600), one per install.
# A known public value or a short key is refused unless DEBUG is on.
SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="") or install_secret(VAR_DIR / "secret_key")
if not DEBUG and (SECRET_KEY in PUBLIC_SECRET_KEYS or len(SECRET_KEY) < MIN_SECRET_KEY_CHARS):
    raise ImproperlyConfigured(
        f"DJANGO_SECRET_KEY is a public default or shorter than {MIN_SECRET_KEY_CHARS} characters; "
        "unset it to use the per-install key in VAR_DIR/secret_key, or set a long random value"
    )
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "channels",
    "django_neomodel",
    "core",
    "knowledge",
    "memory",
    "retrieval",
    "sessions_graph",
    "curation",
    "mcp_server",
    "portability",
]

MIDDLEWARE = [
    "core.metrics.RequestMetricsMiddleware",
    "core.api.middleware.BodySizeLimitMiddleware",
    "core.api.middleware.ProbeThrottleMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "core.api.middleware.DependencyErrorMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"
WSGI_APPLICATION = "config.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": env.db_url("DATABASE_URL", default=f"sqlite:///{VAR_DIR / 'db.sqlite3'}"),
}
if DATABASES["default"]["ENGINE"].endswith("sqlite3"):
    # Web, worker and beat share the file: wait for a lock instead of failing at once. The test
    # database is a file too, so a real Celery worker process can see what a test committed.
    # Transactions begin IMMEDIATE: a deferred one that read first and then writes cannot wait for
    # another writer (SQLite answers "database is locked" at once, whatever the timeout).
    DATABASES["default"].setdefault("OPTIONS", {}).update(timeout=30, transaction_mode="IMMEDIATE")
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test-db.sqlite3")}
# HTTP requests run on a fixed pool of WEB_THREADS threads (core/runtime/http_threads.py), each keeping its
# SQL connection for DB_CONN_MAX_AGE seconds (0: a new connection per request).
for _db in DATABASES.values():
    _db["CONN_MAX_AGE"] = env.int("DB_CONN_MAX_AGE", default=300)
    _db["CONN_HEALTH_CHECKS"] = True
WEB_THREADS = env.int("WEB_THREADS", default=16)
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
# WhiteNoise serves the admin's and API docs' static files from the ASGI server itself.
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}

# Logs of the Python processes as text lines (`plain`) or one JSON object per line (`json`: time,
# level, logger, message, extra fields, exc_info), and then HTTP access records as JSON too.
# OpenTelemetry traces over OTLP/HTTP (core/runtime/tracing.py); the SDK reads the standard OTEL_* variables
# (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_SERVICE_NAME, OTEL_TRACES_SAMPLER, OTEL_BSP_SCHEDULE_DELAY, …)
TRACING_ENABLED = env.bool("TRACING_ENABLED", default=False)
OTEL_SERVICE_NAME = env.str("OTEL_SERVICE_NAME", default="")  # empty: knowledge-platform-web / -worker
LOG_FORMAT = env.str("LOG_FORMAT", default="plain")
if LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be plain or json, not {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "format": "{asctime}{levelname}{name}{message}",
            "style": "{",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": LOG_FORMAT}},
    "root": {"handlers": ["console"], "level": env.str("LOG_LEVEL", default="INFO")},
    "loggers": {"neo4j": {"level": "WARNING"}, "httpx": {"level": "WARNING"}, "httpx2": {"level": "WARNING"}},
}

# make run resets the `admin` user's password to this, or to a fresh random one when empty.
ADMIN_PASSWORD = env.str("DJANGO_ADMIN_PASSWORD", default="")

# --- MCP (mcp_server/) ----------------------------------------------------------------------------
# The MCP server at MCP_PATH of the web process (streamable HTTP, an API key as bearer token), and
# `manage.py mcp --stdio` for desktop hosts, which acts as MCP_API_KEY.
MCP_ENABLED = env.bool("MCP_ENABLED", default=True)
MCP_PATH = env.str("MCP_PATH", default="/mcp")
MCP_MAX_BODY_BYTES = env.int(
    "MCP_MAX_BODY_BYTES", default=env.int("API_MAX_BODY_BYTES", default=10 * 1024 * 1024)
)
MCP_API_KEY = env.str("MCP_API_KEY", default="")

# --- export and import (portability/) -------------------------------------------------------------
# Export archives and uploaded imports are kept in Django's "portability" storage: this directory
# by default (STORAGES below).
PORTABILITY_ARCHIVE_DIR = Path(
    env.str("PORTABILITY_ARCHIVE_DIR", default=str(VAR_DIR / "archives"))
).resolve()
PORTABILITY_QUEUE = env.str("PORTABILITY_QUEUE", default="celery")  # Celery queue of export and import jobs
PORTABILITY_BATCH = env.int("PORTABILITY_BATCH", default=1000)  # rows read or written per transaction
# node batches an import writes at once (Neo4j decodes and indexes each batch's embeddings on a core)
PORTABILITY_IMPORT_THREADS = env.int("PORTABILITY_IMPORT_THREADS", default=2)
# ISA-L gzip level of export archives (0-3; a higher value means 3)
PORTABILITY_COMPRESS_LEVEL = env.int("PORTABILITY_COMPRESS_LEVEL", default=1)
# The largest archive POST /projects:import accepts (other requests keep API_MAX_BODY_BYTES).
PORTABILITY_IMPORT_MAX_BYTES = env.int("PORTABILITY_IMPORT_MAX_BYTES", default=4 * 1024**3)
# How long an import waits for the project's fulltext index to come online before it finishes.
PORTABILITY_INDEX_WAIT_SEC = env.int("PORTABILITY_INDEX_WAIT_SEC", default=300)
STORAGES["portability"] = {
    "BACKEND": "django.core.files.storage.FileSystemStorage",
    "OPTIONS": {"location": str(PORTABILITY_ARCHIVE_DIR)},
}
# Scheduled backups (docs/portability.md): export archives of every project with an enabled schedule
# (admin: Backup schedules), written to Django's "backups" storage. By default a directory; any
# django-storages backend otherwise, e.g. BACKUP_STORAGE_BACKEND=storages.backends.s3.S3Storage with
# BACKUP_STORAGE_OPTIONS={"bucket_name": "kp-backups", "endpoint_url": "http://minio:9000"} (JSON).
BACKUP_DIR = Path(env.str("BACKUP_DIR", default=str(VAR_DIR / "backups"))).resolve()
BACKUP_STORAGE_BACKEND = env.str(
    "BACKUP_STORAGE_BACKEND", default="django.core.files.storage.FileSystemStorage"
)
BACKUP_STORAGE_OPTIONS = env.json("BACKUP_STORAGE_OPTIONS", default={})
STORAGES["backups"] = {
    "BACKEND": BACKUP_STORAGE_BACKEND,
    "OPTIONS": BACKUP_STORAGE_OPTIONS
    or (
        {"location": str(BACKUP_DIR)}
        if BACKUP_STORAGE_BACKEND == "django.core.files.storage.FileSystemStorage"
        else {}
    ),
}
# Celery beat looks for schedules that are due this often (seconds); 0 turns scheduled backups off
BACKUP_CHECK_EVERY_SEC = env.float("BACKUP_CHECK_EVERY_SEC", default=60.0)
BACKUP_QUEUE = env.str("BACKUP_QUEUE", default="celery")  # Celery queue of backup jobs
# A due backup waits while the project's graph is being written, at most this long (seconds); then
# it is taken anyway: whole, but not a snapshot of one moment (its job names the overlapping jobs)
BACKUP_WAIT_MAX_SEC = env.int("BACKUP_WAIT_MAX_SEC", default=3600)

# --- API ------------------------------------------------------------------------------------------
API_MAX_BODY_BYTES = env.int("API_MAX_BODY_BYTES", default=10 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = API_MAX_BODY_BYTES
API_THROTTLE_RATE = env.str("API_THROTTLE_RATE", default="600/min")
# Failed authentications and cross-tenant probes (another project's id, a missing scope) allowed per
# client address and per key prefix; past it every request from there answers 429 until the window ends.
API_PROBE_RATE = env.str("API_PROBE_RATE", default="30/min")
# A process uses an API key row it read before for at most this long (seconds) while no key changed
# (changes through the ORM, admin or API are seen at once, raw SQL edits after this); 0 reads every time.
AUTH_KEY_CACHE_SEC = env.float("AUTH_KEY_CACHE_SEC", default=30.0)
# Projects one API key (admin scope) may create; staff users with core.add_project have no quota.
API_KEY_PROJECT_QUOTA = env.int("API_KEY_PROJECT_QUOTA", default=20)
# An open progress websocket re-checks its key at most this often (seconds) while events flow;
# revoking or deleting a key also closes its sockets at once.
WS_KEY_RECHECK_SEC = env.float("WS_KEY_RECHECK_SEC", default=30.0)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "core.auth.keys.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    "DEFAULT_THROTTLE_CLASSES": ["core.api.throttling.ApiKeyRateThrottle"],
    "DEFAULT_THROTTLE_RATES": {"api_key": API_THROTTLE_RATE},
    "DEFAULT_PARSER_CLASSES": [
        "core.api.parsers.FastJSONParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "core.errors.api_exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}

SPECTACULAR_SETTINGS = {
    "TITLE": "Knowledge platform API",
    "DESCRIPTION": "Documents, retrieval, DRIFT search, agent memory and sessions on Neo4j.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI is served from the installed sidecar package, not a CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # one name per choice set that several fields share
    "ENUM_NAME_OVERRIDES": {
        "AccessibilityEnum": "core.models.ACCESSIBILITY",
        "SearchModeEnum": "retrieval.dto.MODES",
        "MemorySearchModeEnum": "memory.dto.SEARCH_MODES",
        "DriftModeEnum": ["llm", "extractive"],
    },
}

# GET of a session returns at most this many events per page (next_events_cursor for the rest).
SESSION_EVENTS_PAGE_MAX = env.int("SESSION_EVENTS_PAGE_MAX", default=1000)

# --- Neo4j ------------------------------------------------------------------------------------------
# NEO4J_URI unset: the embedded launcher (platform/neo4j) is started on NEO4J_BOLT_PORT.
# NEO4J_URI set: that server is used and nothing local is started.
NEO4J_BOLT_PORT = env.int("NEO4J_BOLT_PORT", default=7687)
NEO4J_EMBEDDED = not env.str("NEO4J_URI", default="")
NEO4J_URI = env.str("NEO4J_URI", default="") or f"bolt://127.0.0.1:{NEO4J_BOLT_PORT}"
NEO4J_USERNAME = env.str("NEO4J_USERNAME", default="neo4j")
# The embedded Neo4j's password is generated per install (VAR_DIR/neo4j_password, 0600) unless set.
NEO4J_PASSWORD = env.str("NEO4J_PASSWORD", default="") or (
    install_secret(VAR_DIR / "neo4j_password") if NEO4J_EMBEDDED else ""
)
NEO4J_DATABASE = env.str("NEO4J_DATABASE", default="neo4j")
NEO4J_CONNECTION_TIMEOUT_SEC = env.float("NEO4J_CONNECTION_TIMEOUT_SEC", default=5.0)
NEO4J_MAX_POOL_SIZE = env.int("NEO4J_MAX_POOL_SIZE", default=50)
# django-neomodel would otherwise open a second driver from a URL; the platform hands neomodel
# its one shared driver instead (core.graph).
NEOMODEL_NEO4J_BOLT_URL = None
NEOMODEL_SIGNALS = True
NEOMODEL_FORCE_TIMEZONE = False

# --- Redis, Celery, Channels ----------------------------------------------------------------------
REDIS_PORT = env.int("REDIS_PORT", default=6379)
REDIS_EMBEDDED = not env.str("REDIS_URL", default="")
# The embedded Redis's password: REDIS_PASSWORD, else generated per install (VAR_DIR/redis_password).
REDIS_PASSWORD = env.str("REDIS_PASSWORD", default="") or (
    install_secret(VAR_DIR / "redis_password") if REDIS_EMBEDDED else ""
)
REDIS_URL = env.str("REDIS_URL", default="") or f"redis://:{REDIS_PASSWORD}@127.0.0.1:{REDIS_PORT}/0"

CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL)
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default=REDIS_URL)
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=3600)
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=3300)
CELERY_WORKER_CONCURRENCY = env.int("CELERY_WORKER_CONCURRENCY", default=2)
# Celery's own log format replaces Django's unless JSON logs are asked for; Python's warnings then
# become log records too (logger `py.warnings`) instead of text on stderr
CELERY_WORKER_HIJACK_ROOT_LOGGER = LOG_FORMAT != "json"
logging.captureWarnings(LOG_FORMAT == "json")
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# A worker holds a lease of this many seconds on each task it holds (renewed every third of it); a
# task whose worker died (kill -9) is handed out again once its lease lapsed
# (core/runtime/task_leases.py). 0 = off.
CELERY_LEASE_TTL_SEC = env.float("CELERY_LEASE_TTL_SEC", default=10.0)
# Every this many seconds one worker sends again the task messages that unfinished work expects and
# that the broker lost before any worker recorded them (core/runtime/lost_tasks.py). 0 = off.
TASK_RECONCILE_EVERY_SEC = env.float("TASK_RECONCILE_EVERY_SEC", default=30.0)
# kombu's own redelivery of an unacknowledged task, the fallback when leases are off: longer than the
# task time limit, so a task still running is never handed out a second time.
CELERY_VISIBILITY_TIMEOUT_SEC = env.int("CELERY_VISIBILITY_TIMEOUT_SEC", default=CELERY_TASK_TIME_LIMIT + 300)
# The lock a worker holds while handing such tasks out again expires as soon: a worker killed while
# holding it would otherwise keep every other worker from restoring anything for kombu's 5 minutes.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": CELERY_VISIBILITY_TIMEOUT_SEC,
    "unacked_mutex_expire": min(CELERY_VISIBILITY_TIMEOUT_SEC, 300),
}
CELERY_TIMEZONE = TIME_ZONE
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")

# Django's cache (API throttling buckets) lives in Redis so every web process shares it.
CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": "kp",
        "OPTIONS": {"socket_connect_timeout": 2, "socket_timeout": 2},
    }
}

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        # redis-py 8 gives sockets a 5 s read timeout by default, shorter than channels-redis's own
        # blocking reads: an idle websocket would die after ~5 s (channels_redis #422)
        "CONFIG": {"hosts": [{"address": REDIS_URL, "socket_timeout": 30}], "capacity": 1000, "expiry": 60},
    }
}

# Progress events (DESIGN.md section 6) also go to this Redis pub/sub channel; empty disables it.
PROGRESS_REDIS_CHANNEL = env.str("PROGRESS_REDIS_CHANNEL", default="ui:retrieval_progress")

# --- LLM and embeddings ---------------------------------------------------------------------------
# LLM_PROVIDER: "none", "openai" (OpenAI or any OpenAI-compatible LLM_BASE_URL) or "azure".
# Empty means: "openai" when LLM_API_KEY or LLM_BASE_URL is set, else "none" (extractive mode).
LLM_API_KEY = env.str("LLM_API_KEY", default="") or env.str("OPENAI_API_KEY", default="")
LLM_BASE_URL = env.str("LLM_BASE_URL", default="")
LLM_PROVIDER = env.str("LLM_PROVIDER", default="") or ("openai" if (LLM_API_KEY or LLM_BASE_URL) else "none")
if LLM_PROVIDER not in ("none", "openai", "azure"):
    raise ImproperlyConfigured(f"LLM_PROVIDER must be none, openai or azure, not {LLM_PROVIDER!r}")
LLM_MODEL = env.str("LLM_MODEL", default="gpt-4o-mini")
LLM_TEMPERATURE = env.float("LLM_TEMPERATURE", default=0.0)
LLM_TIMEOUT_SEC = env.float("LLM_TIMEOUT_SEC", default=30.0)
AZURE_OPENAI_API_VERSION = env.str("AZURE_OPENAI_API_VERSION", default="2024-10-21")

RETRY_MAX_ATTEMPTS = env.int("RETRY_MAX_ATTEMPTS", default=3)
RETRY_BACKOFF_BASE_SEC = env.float("RETRY_BACKOFF_BASE_SEC", default=2.0)
RETRY_BACKOFF_FACTOR = env.float("RETRY_BACKOFF_FACTOR", default=2.0)
RETRY_BACKOFF_MAX_SEC = env.float("RETRY_BACKOFF_MAX_SEC", default=60.0)

# EMBEDDINGS_PROVIDER: "local" (all-MiniLM-L6-v2, 384 dims, offline) or "openai" / "azure".
EMBEDDINGS_PROVIDER = env.str("EMBEDDINGS_PROVIDER", default="local")
if EMBEDDINGS_PROVIDER not in ("local", "openai", "azure"):
    raise ImproperlyConfigured(
        f"EMBEDDINGS_PROVIDER must be local, openai or azure, not {EMBEDDINGS_PROVIDER!r}"
    )
EMBEDDINGS_MODEL = env.str(
    "EMBEDDINGS_MODEL",
    default="all-MiniLM-L6-v2" if EMBEDDINGS_PROVIDER == "local" else "text-embedding-3-small",
)
EMBEDDINGS_DIMENSIONS = env.int(
    "EMBEDDINGS_DIMENSIONS", default=384 if EMBEDDINGS_PROVIDER == "local" else 1536
)
EMBEDDINGS_BATCH_SIZE = env.int("EMBEDDINGS_BATCH_SIZE", default=64)
# The local model's runtime: "onnx" (ONNX Runtime, ~1.25x as fast here, no PyTorch once exported) or
# "torch" (sentence-transformers on PyTorch); the same vectors within 1e-5 (core/embeddings/onnx.py)
EMBEDDINGS_LOCAL_RUNTIME = env.str("EMBEDDINGS_LOCAL_RUNTIME", default="onnx")
if EMBEDDINGS_LOCAL_RUNTIME not in ("onnx", "torch"):
    raise ImproperlyConfigured(
        f"EMBEDDINGS_LOCAL_RUNTIME must be onnx or torch, not {EMBEDDINGS_LOCAL_RUNTIME!r}"
    )
# Where the local model's ONNX export is written on first use and found by every later process: beside
# the virtualenvs `make` keeps, shared by installs (the file's name carries the model package's version)
EMBEDDINGS_MODEL_DIR = Path(
    env.str("EMBEDDINGS_MODEL_DIR", default=str(Path.home() / ".cache" / "knowledge-platform" / "models"))
).resolve()
# Threads of the local embedder in a worker pool process; 0 = cores / CELERY_WORKER_CONCURRENCY
EMBEDDINGS_LOCAL_THREADS = env.int("EMBEDDINGS_LOCAL_THREADS", default=0)
# texts the local model runs at once, after a call's texts are sorted by length: on a CPU a smaller
# batch pads less (384 hotpotqa passages, one thread, calls of 64: 16.5 s at 16 against 32.7 s at 64)
EMBEDDINGS_LOCAL_BATCH = env.int("EMBEDDINGS_LOCAL_BATCH", default=16)
# Local embedder: a batch of at most this many texts (a query, DRIFT's follow-ups) runs on one thread
EMBEDDINGS_SMALL_BATCH_TEXTS = env.int("EMBEDDINGS_SMALL_BATCH_TEXTS", default=8)
# The ASGI app warms up on a background thread as it starts (core/runtime/warmup.py): it loads the
# embedder, then runs each hot query (search modes, DRIFT without an LLM, a memory search)
# WARM_UP_ROUNDS times against the project ingested last (each round another question: a generic
# one, then ones naming its documents), so its first query is as fast as the tenth; it first reads up
# to WARM_UP_CHUNKS of that project's chunks (text and document) into Neo4j's page cache. More than 10:
# Neo4j compiles a query's expressions to bytecode on its 11th run (its internal setting
# internal.cypher.expression_recompilation_limit, 10), and that run takes 10-20 ms more; a query the
# warm-up ran only 10 times left that recompilation to the first real request (docs/operations.md)
EMBEDDINGS_WARM_AT_START = env.bool("EMBEDDINGS_WARM_AT_START", default=True)
WARM_UP_ROUNDS = env.int("WARM_UP_ROUNDS", default=12)
WARM_UP_CHUNKS = env.int("WARM_UP_CHUNKS", default=20_000)
EMBEDDINGS_API_KEY = env.str("EMBEDDINGS_API_KEY", default="") or LLM_API_KEY
EMBEDDINGS_BASE_URL = env.str("EMBEDDINGS_BASE_URL", default="") or LLM_BASE_URL

# --- Ingestion and communities ------------------------------------------------------------------
INGEST_MAX_DOCUMENTS = env.int("INGEST_MAX_DOCUMENTS", default=500)  # per request
INGEST_MAX_TITLE_CHARS = env.int("INGEST_MAX_TITLE_CHARS", default=1000)
INGEST_MAX_TEXT_CHARS = env.int("INGEST_MAX_TEXT_CHARS", default=5_000_000)
# Uploaded PDF and HTML files are parsed in a child process (knowledge/pipeline/parsing.py): more pages
# than PDF_MAX_PAGES or text beyond INGEST_MAX_TEXT_CHARS answer 413; more CPU seconds, MB of address
# space or wall-clock seconds than these answer 400 unparseable_document.
PDF_MAX_PAGES = env.int("PDF_MAX_PAGES", default=2000)
PARSE_CPU_SEC = env.int("PARSE_CPU_SEC", default=30)
PARSE_MEMORY_MB = env.int("PARSE_MEMORY_MB", default=1024)
PARSE_TIMEOUT_SEC = env.float("PARSE_TIMEOUT_SEC", default=60.0)
INGEST_BATCH_SIZE = env.int("INGEST_BATCH_SIZE", default=64)  # documents per Celery task
INGEST_MAX_RETRIES = env.int("INGEST_MAX_RETRIES", default=20)  # for a dependency outage
INGEST_RETRY_BASE_SEC = env.float("INGEST_RETRY_BASE_SEC", default=2.0)
INGEST_QUEUE = env.str("INGEST_QUEUE", default="celery")  # Celery queue of ingestion and community tasks
CHUNK_SIZE_TOKENS = env.int("CHUNK_SIZE_TOKENS", default=600)  # defaults of new projects
CHUNK_OVERLAP_TOKENS = env.int("CHUNK_OVERLAP_TOKENS", default=100)
EXTRACT_MAX_ENTITIES_PER_CHUNK = env.int("EXTRACT_MAX_ENTITIES_PER_CHUNK", default=8)
EXTRACT_GLEANING_PASSES = env.int("EXTRACT_GLEANING_PASSES", default=1)
ENTITY_MERGE_THRESHOLD = env.float("ENTITY_MERGE_THRESHOLD", default=0.95)
# Lexical neighbours (entity fulltext index) fetched per new entity name for the embedding comparison
ENTITY_RESOLUTION_CANDIDATES = env.int("ENTITY_RESOLUTION_CANDIDATES", default=20)
COMMUNITY_MAX_LEVELS = env.int("COMMUNITY_MAX_LEVELS", default=4)
COMMUNITY_MAX_CLUSTER_SIZE = env.int("COMMUNITY_MAX_CLUSTER_SIZE", default=50)
# Automatic rebuild this long after the last ingestion finished; negative disables it
COMMUNITY_REBUILD_DELAY_SEC = env.float("COMMUNITY_REBUILD_DELAY_SEC", default=30.0)

# --- Retrieval -------------------------------------------------------------------------------------
RETRIEVAL_MAX_QUERY_CHARS = env.int("RETRIEVAL_MAX_QUERY_CHARS", default=10_000)  # longer queries: 400
# Vector search per tenant: exact cosine over scopes up to this many chunks, else the vector index
# over-fetched by (database / scope size) × RETRIEVAL_OVERFETCH, up to RETRIEVAL_MAX_INDEX_CANDIDATES.
RETRIEVAL_EXACT_SCAN_MAX_CHUNKS = env.int("RETRIEVAL_EXACT_SCAN_MAX_CHUNKS", default=1000)
RETRIEVAL_OVERFETCH = env.float("RETRIEVAL_OVERFETCH", default=1.5)
RETRIEVAL_MAX_INDEX_CANDIDATES = env.int("RETRIEVAL_MAX_INDEX_CANDIDATES", default=10_000)
# At least this many candidates from a chunk vector index: HNSW searches with a beam as wide as the
# number asked for, and a beam of top_k × 1.5 missed half of the exact top 10 in 5,000-chunk projects
RETRIEVAL_INDEX_MIN_CANDIDATES = env.int("RETRIEVAL_INDEX_MIN_CANDIDATES", default=100)
# Hybrid: `rrf` (reciprocal rank fusion) or `linear` (min-max normalised, vector weight ALPHA)
RETRIEVAL_HYBRID_FUSION = env.str("RETRIEVAL_HYBRID_FUSION", default="linear")
RETRIEVAL_HYBRID_ALPHA = env.float("RETRIEVAL_HYBRID_ALPHA", default=0.4)
RETRIEVAL_RRF_K = env.int("RETRIEVAL_RRF_K", default=60)
RETRIEVAL_HYBRID_CANDIDATES = env.int("RETRIEVAL_HYBRID_CANDIDATES", default=30)  # per retriever
# one round of pseudo-relevance feedback from hybrid's best hit (retrieval.retrievers.HybridRetriever)
RETRIEVAL_HYBRID_FEEDBACK = env.bool("RETRIEVAL_HYBRID_FEEDBACK", default=True)
# Graph mode (retrieval/passage_graph.py): PageRank damping, hybrid's best chunks seeded and their
# weight beside a title the query names (1.0), the share of a named page's walk that goes back to the
# chunks naming it, and how many projects' graphs a process keeps
RETRIEVAL_GRAPH_DAMPING = env.float("RETRIEVAL_GRAPH_DAMPING", default=0.5)
RETRIEVAL_GRAPH_SEED_TOP = env.int("RETRIEVAL_GRAPH_SEED_TOP", default=10)
RETRIEVAL_GRAPH_PASSAGE_WEIGHT = env.float("RETRIEVAL_GRAPH_PASSAGE_WEIGHT", default=0.15)
RETRIEVAL_GRAPH_BACKWARD_WEIGHT = env.float("RETRIEVAL_GRAPH_BACKWARD_WEIGHT", default=0.5)
RETRIEVAL_GRAPH_CACHE_PROJECTS = env.int("RETRIEVAL_GRAPH_CACHE_PROJECTS", default=16)
# Lucene analyzer of each project's chunk fulltext index (a name from
# db.index.fulltext.listAvailableAnalyzers); changing it takes `manage.py reindex_chunks`
RETRIEVAL_FULLTEXT_ANALYZER = env.str("RETRIEVAL_FULLTEXT_ANALYZER", default="english")
# Enrichment profiles: procedures they may CALL (none by default) and their transaction timeout
RETRIEVAL_PROFILE_PROCEDURES = env.list("RETRIEVAL_PROFILE_PROCEDURES", default=[])
RETRIEVAL_PROFILE_TIMEOUT_SEC = env.float("RETRIEVAL_PROFILE_TIMEOUT_SEC", default=5.0)
# Tuning constants (not from the environment)
RETRIEVAL_MAX_QUERY_TERMS = 64  # fulltext terms kept from a query
RETRIEVAL_SIZE_CACHE_SEC = 30.0  # how long a project's chunk count is reused to pick exact vs index
RETRIEVAL_FILTER_MAX_DOCUMENTS = 100_000  # filters matching more documents answer 400
RETRIEVAL_FEEDBACK_KEEP = 2  # first-round hits that keep their places
RETRIEVAL_FEEDBACK_VECTOR_WEIGHT = 0.5  # the best hit's embedding, added to the query vector
RETRIEVAL_FEEDBACK_TERMS = 32  # distinct words of the best hit added to the fulltext query
RETRIEVAL_FEEDBACK_TERM_BOOST = 0.3  # Lucene boost of those words

# --- DRIFT search (POST /retrieve, seed 002) -----------------------------------------------------------
DRIFT_TOP_K = env.int("DRIFT_TOP_K", default=5)  # primer communities when the request gives no top_k
DRIFT_MAX_DEPTH = env.int("DRIFT_MAX_DEPTH", default=2)  # follow-up rounds
DRIFT_MAX_FOLLOWUPS = env.int("DRIFT_MAX_FOLLOWUPS", default=5)  # follow-ups run per round
DRIFT_CONCURRENCY = env.int("DRIFT_CONCURRENCY", default=5)  # follow-ups of a round run side by side
DRIFT_FOLLOWUP_TIMEOUT_SEC = env.float("DRIFT_FOLLOWUP_TIMEOUT_SEC", default=60.0)  # slower: dropped
# the primer scores a level of at most this many communities exactly; larger ones use the vector index
DRIFT_EXACT_SCAN_MAX_COMMUNITIES = env.int("DRIFT_EXACT_SCAN_MAX_COMMUNITIES", default=100)
DRIFT_PRIMER_OVERFETCH = env.float("DRIFT_PRIMER_OVERFETCH", default=10.0)  # × the level's share of the index
DRIFT_SAMPLE_CHUNKS = env.int("DRIFT_SAMPLE_CHUNKS", default=3)  # representative chunks per community
DRIFT_FOLLOWUP_CHUNKS = env.int("DRIFT_FOLLOWUP_CHUNKS", default=10)  # hybrid hits per follow-up
MAX_CHUNKS_FOR_PROMPT = env.int("MAX_CHUNKS_FOR_PROMPT", default=12)  # chunks shown to a local executor
# A question is "nothing relevant" when no chunk reaches this vector score (Neo4j's cosine score,
# (1 + cos) / 2: 0.6 is a cosine of 0.2) and no fulltext term matches
DRIFT_MIN_RELEVANCE = env.float("DRIFT_MIN_RELEVANCE", default=0.6)
# Tuning constants (not from the environment)
DRIFT_NEIGHBOUR_CHUNKS = 3  # chunks of related entities added to a follow-up's context
DRIFT_MAX_ENTITIES = 8  # entities per chunk in a neighbourhood
DRIFT_MAX_RELATIONS = 8  # relations per chunk in a neighbourhood
DRIFT_KEY_FACTS = 6  # key facts of an extractive answer

# --- Memory ------------------------------------------------------------------------------------------
# Roles stored from a batch; other roles are skipped and reported back
# every role the agent frameworks send (OpenAI / Agent Framework: user, assistant, system, tool; ADK's
# user and model become user and assistant); another role is 400, never dropped
MEMORY_ROLES = env.list("MEMORY_ROLES", default=["user", "assistant", "system", "tool"])
# Relevance floors of memory search (docs/memory.md, "Relevance floor"): a vector hit scoring below this
# ((1 + cosine) / 2, the score returned) is not returned (calibrated for the default local embedder by
# bench/memory_floor.py on locomo-dev); a fulltext hit below this Lucene score is not (0: any matching
# word). Hybrid floors each side before fusing. A request's min_score overrides the mode's floor.
MEMORY_MIN_SCORE_VECTOR = env.float("MEMORY_MIN_SCORE_VECTOR", default=0.675)
MEMORY_MIN_SCORE_FULLTEXT = env.float("MEMORY_MIN_SCORE_FULLTEXT", default=0.0)
# The relevance gate of vector and hybrid memory search: when even the nearest message scores below
# this, the query is about nothing stored and nothing is returned (hybrid still answers when a message
# holds every word of the query). Calibrated with the floor by bench/memory_floor.py.
MEMORY_MIN_SCORE_QUERY = env.float("MEMORY_MIN_SCORE_QUERY", default=0.68)
# Ranking of memory search (docs/decisions.md, "Memory: speaker and date in what is searched"): hybrid's
# weight of the vector side (the fulltext side weighs 1 - this; both min-max scaled), and the share of a
# message's fulltext score that the next message of its conversation also gets (a reply is found by the
# words of what it answers; 0: none). Both chosen on locomo-dev by bench/locomo.py.
MEMORY_HYBRID_ALPHA = env.float("MEMORY_HYBRID_ALPHA", default=0.5)
MEMORY_CONTEXT_WEIGHT = env.float("MEMORY_CONTEXT_WEIGHT", default=0.5)
# A query naming one of the scope's speakers ranks that speaker's messages among themselves; the other
# messages' scores are scaled by this (1: speakers are not told apart). Chosen on locomo-dev.
MEMORY_SPEAKER_OTHER_WEIGHT = env.float("MEMORY_SPEAKER_OTHER_WEIGHT", default=0.5)
if not 0.0 <= MEMORY_SPEAKER_OTHER_WEIGHT <= 1.0:
    raise ImproperlyConfigured("MEMORY_SPEAKER_OTHER_WEIGHT must be between 0 and 1")
MEMORY_SPEAKER_MAX_AUTHORS = 64
# A message that mostly asks (a question and fewer than 12 words stated beside it: memory.text.asks) has
# its score in every ranked memory search mode multiplied by this (1: no difference). Chosen on locomo-dev
# (docs/decisions.md, "Memory: turns that ask").
MEMORY_ASKING_WEIGHT = env.float("MEMORY_ASKING_WEIGHT", default=0.5)
if not 0.0 <= MEMORY_ASKING_WEIGHT <= 1.0:
    raise ImproperlyConfigured("MEMORY_ASKING_WEIGHT must be between 0 and 1")
# Sentence vectors (memory.vectors): a message of two or more sentences is embedded sentence by sentence
# (at most MEMORY_SENTENCE_VECTORS_MAX vectors; longer ones in runs), its own vector their mean. Vector
# ranking scores its first MEMORY_SENTENCE_CANDIDATES by mean + MEMORY_SENTENCE_WEIGHT x (best sentence -
# mean). Weight chosen in simulation on locomo-dev (docs/decisions.md, "Sentence vectors").
MEMORY_SENTENCE_VECTORS = env.bool("MEMORY_SENTENCE_VECTORS", default=True)
MEMORY_SENTENCE_VECTORS_MAX = env.int("MEMORY_SENTENCE_VECTORS_MAX", default=16)
MEMORY_SENTENCE_WEIGHT = env.float("MEMORY_SENTENCE_WEIGHT", default=0.5)
MEMORY_SENTENCE_CANDIDATES = env.int("MEMORY_SENTENCE_CANDIDATES", default=100)
# a sentence of fewer words joins its neighbour instead of being embedded alone (1: every sentence alone)
MEMORY_SENTENCE_MIN_WORDS = env.int("MEMORY_SENTENCE_MIN_WORDS", default=5)
if not 2 <= MEMORY_SENTENCE_VECTORS_MAX <= 64:
    raise ImproperlyConfigured("MEMORY_SENTENCE_VECTORS_MAX must be between 2 and 64")
if not 0.0 <= MEMORY_SENTENCE_WEIGHT <= 1.0:
    raise ImproperlyConfigured("MEMORY_SENTENCE_WEIGHT must be between 0 and 1")
if not 1 <= MEMORY_SENTENCE_CANDIDATES <= 1000:
    raise ImproperlyConfigured("MEMORY_SENTENCE_CANDIDATES must be between 1 and 1000")
if not 1 <= MEMORY_SENTENCE_MIN_WORDS <= 50:
    raise ImproperlyConfigured("MEMORY_SENTENCE_MIN_WORDS must be between 1 and 50")
# Graph-mode memory search (hybrid spread through shared mentions, memory.selectors.MessageSearch.expanded):
# how many of hybrid's first hits pass their score on, the weight of what they pass, and the largest share
# of the scope's messages a mention may be held by and still link them. Chosen on locomo-dev.
MEMORY_GRAPH_SEEDS = env.int("MEMORY_GRAPH_SEEDS", default=5)
MEMORY_GRAPH_WEIGHT = env.float("MEMORY_GRAPH_WEIGHT", default=0.2)
MEMORY_GRAPH_MAX_SHARE = env.float(
    "MEMORY_GRAPH_MAX_SHARE", default=0.05
)  # a scope with more distinct authors than this is not speaker-aware
# Stores leave embedding to their processing job and answer 202 at once (a request's embed_in_worker wins)
MEMORY_EMBED_IN_WORKER = env.bool("MEMORY_EMBED_IN_WORKER", default=False)
# A processing job embeds its store's messages and those of the project's stores queued behind it, up
# to this many messages in all (memory/embedding.py); a queued job's messages are taken by one job only,
# for MEMORY_EMBED_CLAIM_SEC (after that, if still without embeddings, another job may take them)
MEMORY_EMBED_BATCH = env.int("MEMORY_EMBED_BATCH", default=256)
MEMORY_EMBED_CLAIM_SEC = env.int("MEMORY_EMBED_CLAIM_SEC", default=600)
MEMORY_MAX_MESSAGES_PER_REQUEST = env.int("MEMORY_MAX_MESSAGES_PER_REQUEST", default=1000)  # more: 413
MEMORY_MAX_MESSAGE_CHARS = env.int("MEMORY_MAX_MESSAGE_CHARS", default=32_000)  # longer text: 413
# Conversation-aware search (POST /search with `conversation`): how many of each source are fused, and
# the similarity (Neo4j's normalised cosine, (1 + cos) / 2) a past message needs to count
CONVERSATION_SEARCH_PAST = env.int("CONVERSATION_SEARCH_PAST", default=5)
CONVERSATION_SEARCH_REFERENCED = env.int("CONVERSATION_SEARCH_REFERENCED", default=3)
CONVERSATION_SEARCH_RECENT = env.int("CONVERSATION_SEARCH_RECENT", default=5)
CONVERSATION_SEARCH_MIN_SIMILARITY = env.float("CONVERSATION_SEARCH_MIN_SIMILARITY", default=0.7)
# Chat turns (POST /conversations:chat): earlier messages given to the answer, sentences of an
# extractive answer
CHAT_HISTORY_MESSAGES = env.int("CHAT_HISTORY_MESSAGES", default=10)
CHAT_EXTRACTIVE_SENTENCES = env.int("CHAT_EXTRACTIVE_SENTENCES", default=3)
# Documents and chunks one message may reference (seed 003's (:Message)-[:REFERENCES]->); more: 400
MEMORY_MAX_REFERENCES_PER_MESSAGE = env.int("MEMORY_MAX_REFERENCES_PER_MESSAGE", default=100)
# A conversation is summarised once this many messages (or tokens) are not covered by a summary
MEMORY_SUMMARY_MESSAGES = env.int("MEMORY_SUMMARY_MESSAGES", default=20)
MEMORY_SUMMARY_TOKENS = env.int("MEMORY_SUMMARY_TOKENS", default=4000)
# Consolidation folds messages older than this into summaries (seed 003: 90 days)
MEMORY_CONSOLIDATE_AFTER_DAYS = env.int("MEMORY_CONSOLIDATE_AFTER_DAYS", default=90)
# Derive facts, preferences, mentions and summaries in a Celery job after every store
MEMORY_PROCESS_ON_STORE = env.bool("MEMORY_PROCESS_ON_STORE", default=True)
MEMORY_QUEUE = env.str("MEMORY_QUEUE", default="celery")
# Celery beat consolidates every project's old messages this often (hours); 0 (the default) leaves it
# to the default retention policy "conversation turns older than 90 days" (curation)
MEMORY_CONSOLIDATE_EVERY_HOURS = env.float("MEMORY_CONSOLIDATE_EVERY_HOURS", default=0.0)
# Vector search over scopes up to this many memories is an exact scan, beyond it the index
MEMORY_EXACT_SCAN_MAX = env.int("MEMORY_EXACT_SCAN_MAX", default=5000)
# How the memory vector index (HNSW) is built, applied when it is created (Neo4j 5.26 or later):
# neighbours per node, candidate list while inserting, quantization. Every store inserts into it, and
# Lucene's merges rebuild it; quantization is off because on Neo4j 2026 the merges spent a third of
# their time quantizing, and stores of client embeddings ran ~12 % faster without it, while searches
# of a scope up to MEMORY_EXACT_SCAN_MAX memories scan exactly anyway (docs/decisions.md).
MEMORY_VECTOR_INDEX_M = env.int("MEMORY_VECTOR_INDEX_M", default=16)
MEMORY_VECTOR_INDEX_EF_CONSTRUCTION = env.int("MEMORY_VECTOR_INDEX_EF_CONSTRUCTION", default=100)
MEMORY_VECTOR_INDEX_QUANTIZATION = env.bool("MEMORY_VECTOR_INDEX_QUANTIZATION", default=False)
# Accessibility of new projects' conversations: private (seen only by searches naming the owner),
# shared or public (seen by any search whose scope matches)
MEMORY_DEFAULT_ACCESSIBILITY = env.str("MEMORY_DEFAULT_ACCESSIBILITY", default="shared")
# --- Curation: privacy, retention, erasure -------------------------------------------------------
# Phone numbers written without a country code are read as numbers of this region (ISO 3166 code)
PII_PHONE_REGION = env.str("PII_PHONE_REGION", default="US")
# Celery beat runs every enabled retention policy this often (hours); 0 turns it off
RETENTION_EVERY_HOURS = env.float("RETENTION_EVERY_HOURS", default=24.0)
RETENTION_BATCH = env.int("RETENTION_BATCH", default=500)  # nodes handled per transaction by a run
RETENTION_QUEUE = env.str("RETENTION_QUEUE", default="celery")  # Celery queue of retention runs and erasures
# Graph content pages of the admin show this many rows per page
CURATION_PAGE_SIZE = env.int("CURATION_PAGE_SIZE", default=50)
# neighbours per group and page in the admin's graph view (a hub shows one page and a "more" node)
GRAPH_VIEW_PAGE_SIZE = env.int("GRAPH_VIEW_PAGE_SIZE", default=50)

CELERY_BEAT_SCHEDULE = {}
if RETENTION_EVERY_HOURS > 0:
    CELERY_BEAT_SCHEDULE["retention-enforce"] = {
        "task": "curation.tasks.retention_enforce_all",
        "schedule": RETENTION_EVERY_HOURS * 3600,
    }
if MEMORY_CONSOLIDATE_EVERY_HOURS > 0:
    CELERY_BEAT_SCHEDULE["memory-consolidate"] = {
        "task": "memory.tasks.memory_consolidate_all",
        "schedule": MEMORY_CONSOLIDATE_EVERY_HOURS * 3600,
    }
if BACKUP_CHECK_EVERY_SEC > 0:
    CELERY_BEAT_SCHEDULE["backups-due"] = {
        "task": "portability.tasks.backups_due",
        "schedule": BACKUP_CHECK_EVERY_SEC,
        "options": {"queue": BACKUP_QUEUE},
    }
# Tuning constants (not from the environment)
MEMORY_SUMMARY_MAX_MESSAGES = 200  # messages per summary segment
MEMORY_FORGET_BATCH = 5000  # nodes deleted per transaction by a forget
MEMORY_SCOPE_MAX_CONVERSATIONS = 100_000  # conversations one summarise/consolidate job visits
MEMORY_HYBRID_CANDIDATES = 50  # per retriever (bench/locomo.py: 30 lost evidence that 50 keeps)
MEMORY_MAX_QUERY_CHARS = 10_000

# --- Health ------------------------------------------------------------------------------------------
# Components that must be up for /healthz to answer 200; "llm" counts only when an LLM is configured.
HEALTHZ_REQUIRED = env.list("HEALTHZ_REQUIRED", default=["neo4j", "redis", "celery", "llm"])
HEALTHZ_TIMEOUT_SEC = env.float("HEALTHZ_TIMEOUT_SEC", default=2.0)
# Prometheus metrics at /metrics (docs/operations.md). With METRICS_TOKEN set a scraper must send it
# as a bearer token; without it only clients on this machine may read them.
METRICS_ENABLED = env.bool("METRICS_ENABLED", default=True)
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
