"""The client packages install from a checkout into a fresh virtualenv that has only their framework,
and work there: nothing is borrowed from the suite's environment. The framework and the packages'
build backend and dependencies come from the wheelhouse `make` fills once per lock
(tests/clients/offline-requirements.txt): the test installs with --no-index, without the registry."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
WHEELHOUSE = Path(sys.prefix) / "wheelhouse"

pytestmark = [pytest.mark.slow]

CHECK = """
import agent_framework, agent_framework_knowledge, knowledge_platform_client
from agent_framework import ContextProvider
from agent_framework_knowledge import ConfigurationError, KnowledgeContextProvider
provider = KnowledgeContextProvider(url="http://127.0.0.1:8000", api_key="kp_a_b", project_id="p1",
                                    memory_enabled=True, user_id="ana")
assert isinstance(provider, ContextProvider)
try:
    KnowledgeContextProvider()
except ConfigurationError as exc:
    assert "KNOWLEDGE_PLATFORM_URL" in str(exc)
else:
    raise AssertionError("no configuration error")
print(agent_framework.__version__, agent_framework_knowledge.__file__)
"""


def _run(*args: str, cwd: Path = REPO) -> str:
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, f"{' '.join(args)}\n{done.stdout}\n{done.stderr}"
    return done.stdout


def test_agent_framework_knowledge_installs_next_to_maf_alone(tmp_path: Path) -> None:
    assert any(WHEELHOUSE.glob("agent_framework_core-1.23.0-*.whl")), (
        f"no wheelhouse at {WHEELHOUSE}: run make test"
    )
    venv = tmp_path / "venv"
    _run(sys.executable, "-m", "venv", str(venv))
    python = str(venv / "bin" / "python")
    # --no-cache-dir: pip keeps the wheels it built from a file: URL, and would install an older build
    # of the checkout's client package under the same version
    offline = (
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-cache-dir",
        "--no-index",
        "--find-links",
        str(WHEELHOUSE),
    )
    _run(python, *offline, "agent-framework-core==1.23.0")
    _run(python, *offline, str(REPO / "clients" / "agent-framework"))
    installed = _run(python, "-m", "pip", "list", "--format=freeze")
    assert "agent-framework-knowledge==0.1.0" in installed
    assert "knowledge-platform-client==0.1.0" in installed
    assert "google-adk" not in installed and "Django" not in installed  # nothing of the platform's own
    out = _run(python, "-c", CHECK, cwd=tmp_path)  # outside the checkout: the installed copies
    assert out.startswith("1.23.0 ") and str(venv) in out
    usage = _run(str(venv / "bin" / "knowledge-platform"), "chat", "--help", cwd=tmp_path)
    assert "--persist-chat" in usage and "--conversation-id" in usage  # the client's console script
    # building left nothing behind in the checkout
    leftovers = [p for p in (REPO / "clients").rglob("*") if p.name == "build" or p.suffix == ".egg-info"]
    assert leftovers == []
