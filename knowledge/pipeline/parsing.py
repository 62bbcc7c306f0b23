"""Turn an upload or JSON text into clean text: plain text, Markdown, HTML (inscriptis), PDF (pypdf)."""

from __future__ import annotations

import json
import logging
import posixpath
import re
import signal
import subprocess
import sys
import unicodedata

from django.conf import settings

from core.errors import DependencyUnavailable, InvalidInput, PayloadTooLarge

logger = logging.getLogger(__name__)

TEXT_TYPES = {"text/plain", "text/markdown", "text/x-markdown"}
HTML_TYPES = {"text/html", "application/xhtml+xml"}
PDF_TYPES = {"application/pdf"}
SUPPORTED_TYPES = TEXT_TYPES | HTML_TYPES | PDF_TYPES
EXTENSIONS = {
    ".txt": "text/plain",
    ".text": "text/plain",
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".html": "text/html",
    ".htm": "text/html",
    ".pdf": "application/pdf",
}


_SCHEME = re.compile(r"([a-zA-Z][a-zA-Z0-9+.-]*://)")


class UnparseableDocument(InvalidInput):
    code = "unparseable_document"


def guess_mime_type(filename: str, declared: str | None) -> str:
    declared = (declared or "").split(";")[0].strip().lower()
    if declared in SUPPORTED_TYPES:
        return declared
    ext = posixpath.splitext(filename.lower())[1]
    if ext in EXTENSIONS:
        return EXTENSIONS[ext]
    raise UnparseableDocument(
        f"unsupported file type {declared or ext or 'unknown'!r}; use text, Markdown, HTML or PDF",
        details={"supported": sorted(SUPPORTED_TYPES)},
    )


def decode_text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UnparseableDocument("text is not valid UTF-8", details={"position": exc.start}) from exc


def clean_text(text: str) -> str:
    """Reject NUL bytes; normalise Unicode and line endings."""
    if "\x00" in text:
        raise InvalidInput("text contains NUL bytes", details={"field": "text"})
    text = unicodedata.normalize("NFC", text).replace("\r\n", "\n").replace("\r", "\n")
    # Trailing blanks removed line by line: linear in the text's length. (A regex such as
    # `[ \t]+\n` retries every start position of a long run of blanks and is quadratic.)
    return "\n".join(line.rstrip(" \t") for line in text.split("\n")).strip()


def parse_bytes(raw: bytes, *, mime_type: str) -> str:
    """The clean text of an uploaded file. Its length is checked against INGEST_MAX_TEXT_CHARS
    before it is cleaned (413), and PDF and HTML are parsed in a child process with limits."""
    if mime_type in TEXT_TYPES:
        text = decode_text(raw)
    elif mime_type in HTML_TYPES:
        decode_text(raw)  # the same 400 as a text file for bytes that are not UTF-8
        text = _extract_in_child(raw, mime_type=mime_type)
    elif mime_type in PDF_TYPES:
        text = _extract_in_child(raw, mime_type=mime_type)
    else:
        raise UnparseableDocument(f"unsupported file type {mime_type!r}")
    if len(text) > settings.INGEST_MAX_TEXT_CHARS:
        raise _too_long()
    return clean_text(text)


def _too_long() -> PayloadTooLarge:
    limit = settings.INGEST_MAX_TEXT_CHARS
    return PayloadTooLarge(
        f"the file's text is longer than {limit:,} characters",
        details={"limit": "INGEST_MAX_TEXT_CHARS", "max": limit},
    )


# Untrusted PDF and HTML are parsed in a child process: a small crafted file can cost many seconds of
# CPU or build millions of characters of text (docs/security.md). The child limits its own CPU
# time and address space, refuses a PDF over PDF_MAX_PAGES before reading a page and stops extracting
# once the text passes INGEST_MAX_TEXT_CHARS; this side gives it PARSE_TIMEOUT_SEC of wall-clock time.
# It runs during the request rather than in the ingest worker because a file that cannot be read is
# answered 400 with nothing written (docs/api.md), and a document's identity (its content hash), PII
# redaction at ingest and the "unchanged" no-op are all decided on the extracted text when it is
# submitted. The request thread only waits on the child's pipes, holding no GIL.
_CHILD = "knowledge.pipeline.parse_child"


def _extract_in_child(raw: bytes, *, mime_type: str) -> str:
    kind = "PDF" if mime_type in PDF_TYPES else "HTML file"
    limits = [
        settings.PDF_MAX_PAGES,
        settings.INGEST_MAX_TEXT_CHARS,
        settings.PARSE_CPU_SEC,
        settings.PARSE_MEMORY_MB,
    ]
    try:
        done = subprocess.run(
            # -E -s and an empty environment: nothing of the server's configuration or secrets
            [sys.executable, "-E", "-s", "-m", _CHILD, mime_type, *map(str, limits)],
            input=raw,
            capture_output=True,
            timeout=settings.PARSE_TIMEOUT_SEC,
            cwd=settings.BASE_DIR,
            env={},
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise UnparseableDocument(
            f"the {kind} took longer than {settings.PARSE_TIMEOUT_SEC} s to read",
            details={"limit": "PARSE_TIMEOUT_SEC", "max": settings.PARSE_TIMEOUT_SEC},
        ) from exc
    except OSError as exc:  # no process could be started (out of processes or memory)
        raise DependencyUnavailable("parser", str(exc)) from exc
    if done.returncode == -signal.SIGXCPU:  # RLIMIT_CPU
        raise UnparseableDocument(
            f"reading the {kind} took more than {settings.PARSE_CPU_SEC} s of CPU time",
            details={"limit": "PARSE_CPU_SEC", "max": settings.PARSE_CPU_SEC},
        )
    try:
        answer = json.loads(done.stdout) if done.returncode == 0 else None
    except ValueError:
        answer = None
    if not isinstance(answer, dict):
        stderr = done.stderr.decode(errors="replace")
        if "MemoryError" in stderr:
            answer = {"error": "memory"}
        else:
            logger.warning("parsing a %s stopped with exit code %s: %s", kind, done.returncode, stderr[-500:])
            raise UnparseableDocument(f"the {kind} cannot be read (the parser stopped)")
    error = answer.get("error")
    if error is None:
        return str(answer["text"])
    if error == "characters":
        raise _too_long()
    if error == "pages":
        raise PayloadTooLarge(
            str(answer["message"]), details={"limit": "PDF_MAX_PAGES", "max": settings.PDF_MAX_PAGES}
        )
    if error == "memory":
        raise UnparseableDocument(
            f"reading the {kind} needed more than {settings.PARSE_MEMORY_MB} MB of memory",
            details={"limit": "PARSE_MEMORY_MB", "max": settings.PARSE_MEMORY_MB},
        )
    raise UnparseableDocument(str(answer["message"]))


def standardise_source_path(path: str | None) -> str | None:
    """Seed 003's source paths: forward slashes, no `.`/`..` segments, no trailing slash, scheme kept."""
    if path is None:
        return None
    path = path.strip().replace("\\", "/")
    if not path:
        return None
    if "\x00" in path:
        raise InvalidInput("source_path contains NUL bytes", details={"field": "source_path"})
    scheme = ""
    # linear: one anchored match of a class that cannot contain the ':' that ends it (the path is at
    # most 2,000 characters from the API anyway)
    match = _SCHEME.match(path)
    if match and "\n" not in path:
        scheme, path = match.group(1).lower(), path[match.end() :]
    leading = "/" if path.startswith("/") else ""
    normalised = posixpath.normpath(path)
    if normalised.startswith("../") or normalised == "..":
        raise InvalidInput("source_path may not leave its root with '..'", details={"field": "source_path"})
    normalised = normalised.lstrip("/") if not leading else "/" + normalised.lstrip("/")
    return f"{scheme}{normalised}".rstrip("/") or None
