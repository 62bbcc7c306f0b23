"""Style and configuration rules that CI enforces (DESIGN.md section 8)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, check=False
    )


@pytest.mark.unit
def test_ruff_lint_and_format() -> None:
    lint = _run("ruff", "check", ".")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = _run("ruff", "format", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_mypy_on_core() -> None:
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.unit
def test_import_contracts() -> None:
    """import-linter's contracts of pyproject.toml: layers, independent clients, no task imports."""
    clients = [
        REPO / "clients" / name / "src" for name in ("platform-client", "google-adk", "agent-framework")
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(str(p) for p in [REPO, *clients])}
    result = subprocess.run(
        [str(Path(sys.executable).parent / "lint-imports")],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert result.returncode == 0 and "0 broken" in result.stdout, result.stdout + result.stderr


def _settings_variables() -> set[str]:
    names: set[str] = set()
    for path in (REPO / "config" / "settings.py", REPO / "platform" / "run.py"):
        names |= set(re.findall(r"""env\.\w+\(\s*["']([A-Z0-9_]+)["']""", path.read_text()))
        names |= set(re.findall(r"""os\.environ\.get\(\s*["']([A-Z0-9_]+)["']""", path.read_text()))
    for script in (REPO / "platform").rglob("*"):
        if script.is_file() and script.suffix == "" and script.read_text(errors="ignore").startswith("#!"):
            names |= set(re.findall(r"\$\{([A-Z0-9_]+):-", script.read_text()))
    return names - {"PATH", "HOME", "JAVA_HOME", "MAVEN_OPTS"}  # the shell's, Java's and Maven's own


@pytest.mark.unit
def test_env_example_lists_every_variable() -> None:
    documented = set(re.findall(r"^#?\s*([A-Z0-9_]+)=", (REPO / ".env.example").read_text(), re.MULTILINE))
    missing = _settings_variables() - documented
    assert not missing, f"add to .env.example: {sorted(missing)}"


@pytest.mark.unit
def test_readme_configuration_table_lists_every_variable() -> None:
    readme = (REPO / "README.md").read_text()
    missing = {name for name in _settings_variables() if f"`{name}`" not in readme}
    assert not missing, f"add to README's configuration table: {sorted(missing)}"


@pytest.mark.unit
def test_apps_never_read_the_environment() -> None:
    offenders = []
    for app in ("core", "knowledge", "memory", "retrieval", "sessions_graph", "curation"):
        for path in (REPO / app).rglob("*.py"):
            text = path.read_text()
            if re.search(r"os\.environ\.get\(|os\.getenv\(|os\.environ\[", text):
                offenders.append(str(path.relative_to(REPO)))
    assert offenders == [], offenders
