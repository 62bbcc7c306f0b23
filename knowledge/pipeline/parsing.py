"""Turn an upload or JSON text into clean text: plain text, Markdown, HTML (inscriptis), PDF (pypdf)."""

from __future__ import annotations

import io
import posixpath
import re
import unicodedata

from core.errors import InvalidInput

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
    if mime_type in TEXT_TYPES:
        return clean_text(decode_text(raw))
    if mime_type in HTML_TYPES:
        from inscriptis import get_text

        return clean_text(get_text(decode_text(raw)))
    if mime_type in PDF_TYPES:
        return clean_text(_pdf_text(raw))
    raise UnparseableDocument(f"unsupported file type {mime_type!r}")


def _pdf_text(raw: bytes) -> str:
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError, PyPdfError

    try:
        reader = PdfReader(io.BytesIO(raw), strict=True)
        if reader.is_encrypted:
            raise UnparseableDocument("encrypted PDFs are not supported")
        pages = [page.extract_text() or "" for page in reader.pages]
    except UnparseableDocument:
        raise
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError, OSError) as exc:
        raise UnparseableDocument(f"the PDF cannot be read: {exc}"[:300]) from exc
    return "\n\n".join(p.strip() for p in pages if p.strip())


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
    match = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]*://)(.*)$", path)
    if match:
        scheme, path = match.group(1).lower(), match.group(2)
    leading = "/" if path.startswith("/") else ""
    normalised = posixpath.normpath(path)
    if normalised.startswith("../") or normalised == "..":
        raise InvalidInput("source_path may not leave its root with '..'", details={"field": "source_path"})
    normalised = normalised.lstrip("/") if not leading else "/" + normalised.lstrip("/")
    return f"{scheme}{normalised}".rstrip("/") or None
