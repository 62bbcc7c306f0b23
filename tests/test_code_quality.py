"""Style and configuration rules that CI enforces (DESIGN.md section 8)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, check=False
    )


def test_ruff_lint_and_format() -> None:
    lint = _run("ruff", "check", ".")
    assert lint.returncode == 0, lint.stdout + lint.stderr
    fmt = _run("ruff", "format", "--check", ".")
    assert fmt.returncode == 0, fmt.stdout + fmt.stderr


def test_mypy_on_core() -> None:
    result = _run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr


def _settings_variables() -> set[str]:
    names: set[str] = set()
    for path in (REPO / "config" / "settings.py", REPO / "platform" / "run.py"):
        names |= set(re.findall(r"""env\.\w+\(\s*["']([A-Z0-9_]+)["']""", path.read_text()))
        names |= set(re.findall(r"""os\.environ\.get\(\s*["']([A-Z0-9_]+)["']""", path.read_text()))
    for script in (REPO / "platform").rglob("*"):
        if script.is_file() and script.suffix == "" and script.read_text(errors="ignore").startswith("#!"):
            names |= set(re.findall(r"\$\{([A-Z0-9_]+):-", script.read_text()))
    return names - {"PATH", "HOME", "JAVA_HOME", "MAVEN_OPTS"}  # the shell's, Java's and Maven's own


def test_env_example_lists_every_variable() -> None:
    documented = set(re.findall(r"^#?\s*([A-Z0-9_]+)=", (REPO / ".env.example").read_text(), re.MULTILINE))
    missing = _settings_variables() - documented
    assert not missing, f"add to .env.example: {sorted(missing)}"


def test_readme_configuration_table_lists_every_variable() -> None:
    readme = (REPO / "README.md").read_text()
    missing = {name for name in _settings_variables() if f"`{name}`" not in readme}
    assert not missing, f"add to README's configuration table: {sorted(missing)}"


def test_apps_never_read_the_environment() -> None:
    offenders = []
    for app in ("core", "knowledge", "memory", "retrieval", "sessions_graph", "curation"):
        for path in (REPO / app).rglob("*.py"):
            text = path.read_text()
            if re.search(r"os\.environ\.get\(|os\.getenv\(|os\.environ\[", text):
                offenders.append(str(path.relative_to(REPO)))
    assert offenders == [], offenders
