"""platform/neo4j/java-home: which JDK the embedded Neo4j launcher builds and runs on."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
JAVA_HOME_SCRIPT = REPO / "platform" / "neo4j" / "java-home"


def _fake_jdk(root: Path, major: int) -> Path:
    """A directory shaped like a JDK whose `java` reports the given feature version."""
    home = root / f"jdk-{major}"
    (home / "bin").mkdir(parents=True)
    java = home / "bin" / "java"
    java.write_text(f"#!/bin/sh\necho '    java.specification.version = {major}' >&2\n")
    (home / "bin" / "javac").write_text("#!/bin/sh\nexit 0\n")
    for tool in ("java", "javac"):
        (home / "bin" / tool).chmod(0o755)
    return home


def _run(*args: str, **env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("JAVA_HOME", "NEO4J_JAVA_HOME")}
    result = subprocess.run(
        [str(JAVA_HOME_SCRIPT), *args], env={**clean, **env}, capture_output=True, text=True, check=True
    )
    return result.stdout.strip()


def _machine_majors() -> dict[str, int]:
    jvm = Path("/usr/lib/jvm")
    homes = [p for p in jvm.iterdir() if p.is_dir()] if jvm.is_dir() else []
    javac = shutil.which("javac")
    if javac:
        homes.append(Path(javac).resolve().parents[1])
    return {str(h): int(_run("--major", str(h)) or 0) for h in homes}


def test_major_reads_the_feature_version(tmp_path: Path) -> None:
    assert _run("--major", str(_fake_jdk(tmp_path, 23))) == "23"
    assert _run("--major", str(tmp_path / "not-a-jdk")) == "0"


def test_neo4j_java_home_wins(tmp_path: Path) -> None:
    chosen = _fake_jdk(tmp_path, 17)
    assert _run(NEO4J_JAVA_HOME=str(chosen), JAVA_HOME=str(_fake_jdk(tmp_path, 21))) == str(chosen)


def test_the_newest_jdk_up_to_25_is_chosen(tmp_path: Path) -> None:
    too_new = _fake_jdk(tmp_path, 26)  # newer than the Neo4j line's Lucene supports
    assert _run(JAVA_HOME=str(too_new)) != str(too_new)
    candidate = _fake_jdk(tmp_path, 19)
    majors = {**_machine_majors(), str(candidate): 19}
    best = max(v for v in majors.values() if v <= 25)
    chosen = _run(JAVA_HOME=str(candidate))
    assert majors.get(chosen) == best
