"""Microsoft Agent Framework context provider backed by the knowledge platform's REST API.

`KnowledgeContextProvider` puts the project's search results (or a DRIFT answer) and the scope's
memories into each agent run and stores the run's messages as memories; an API key is all it needs.
"""

from knowledge_platform_client import (
    AuthenticationError,
    ConfigurationError,
    PlatformError,
    PlatformSettings,
    UnavailableError,
)

from agent_framework_knowledge._config import DEFAULT_CONTEXT_PROMPT, ProviderConfig
from agent_framework_knowledge._provider import KnowledgeContextProvider, RunTimings

__all__ = [
    "DEFAULT_CONTEXT_PROMPT",
    "AuthenticationError",
    "ConfigurationError",
    "KnowledgeContextProvider",
    "PlatformError",
    "PlatformSettings",
    "ProviderConfig",
    "RunTimings",
    "UnavailableError",
]
