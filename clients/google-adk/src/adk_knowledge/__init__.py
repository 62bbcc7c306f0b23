"""Google ADK services backed by the knowledge platform: sessions graph and memory over REST."""

from adk_knowledge.memory import PlatformMemoryService
from adk_knowledge.sessions import PlatformSessionService

__all__ = ["PlatformMemoryService", "PlatformSessionService"]
