"""Text of an uploaded PDF or HTML file, extracted in a child process under limits.

`knowledge.pipeline.parsing.parse_bytes` runs this module as
`python -m knowledge.pipeline.parse_child <mime type> <max pages> <max characters> <cpu s> <memory MB>`
with the file on standard input. Before reading it, the process limits itself (CPU seconds and
address space, no core file, no file written, so standard output must be a pipe); it then answers
one JSON object on standard output:
`{"text": …}` or `{"error": "pages" | "characters" | "encrypted" | "unreadable" | "memory", "message": …}`.
A limit the process cannot report itself shows in its exit: killed by SIGXCPU (or SIGKILL at the hard
CPU limit) when out of CPU time.

Extraction stops as soon as the text passes the character cap, and a PDF with more pages than the
cap is refused before any page is read. It imports nothing of Django or of the server, so it starts
in a fraction of a second and holds none of the server's secrets or connections.
"""

from __future__ import annotations

import io
import json
import resource
import sys
from typing import Any

PDF = "application/pdf"


class _Refused(Exception):
    def __init__(self, error: str, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def limit_self(*, cpu_sec: int, memory_mb: int) -> None:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_sec, cpu_sec + 1))
    memory = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))


class _Budget:
    """Characters extracted so far; _Refused once past the cap.

    pypdf gathers a page's text before returning it, so the page's operators are watched as they are
    read: the strings shown by text operators (Tj, TJ, ' and ") are counted, one character per byte,
    or per two bytes in a composite (Type0) font, and the page stops as soon as they pass the cap,
    instead of building millions of characters and refusing them afterwards."""

    _SHOW = {b"Tj", b"TJ", b"'", b'"'}

    def __init__(self, max_chars: int) -> None:
        self.max_chars = max_chars
        self.total = 0
        self.wide_fonts: set[str] = set()
        self.width = 1

    def add(self, count: int) -> None:
        self.total += count
        if self.total > self.max_chars:
            raise _Refused("characters", f"the text is longer than {self.max_chars:,} characters")

    def start_page(self, page: Any) -> None:
        """Note the page's composite fonts (two bytes a character)."""
        self.width = 1
        try:
            fonts = page["/Resources"]["/Font"]
            self.wide_fonts = {
                str(name) for name, font in fonts.items() if font.get_object()["/Subtype"] == "/Type0"
            }
        except (KeyError, TypeError, AttributeError):
            self.wide_fonts = set()

    def watch(self, operator: bytes, operands: Any, cm: Any, tm: Any) -> None:
        if operator == b"Tf" and operands:
            self.width = 2 if str(operands[0]) in self.wide_fonts else 1
        elif operator in self._SHOW:
            self.add(sum(_shown_bytes(operand) for operand in operands) // self.width)


def _shown_bytes(operand: Any) -> int:
    if isinstance(operand, bytes | str):
        return len(operand)
    if isinstance(operand, list):
        return sum(_shown_bytes(item) for item in operand)
    return 0


def pdf_text(raw: bytes, *, max_pages: int, max_chars: int) -> str:
    # parsers load in the parse child process only (their memory and CPU are limited there)
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError, PyPdfError

    budget = _Budget(max_chars)
    parts: list[str] = []
    try:
        reader = PdfReader(io.BytesIO(raw), strict=True)
        if reader.is_encrypted:
            raise _Refused("encrypted", "encrypted PDFs are not supported")
        pages = len(reader.pages)
        if pages > max_pages:
            raise _Refused("pages", f"the PDF has {pages:,} pages; the limit is {max_pages:,}")
        for page in reader.pages:
            before = budget.total
            budget.start_page(page)
            text = (page.extract_text(visitor_operand_before=budget.watch) or "").strip()
            budget.total = before  # the watch was an estimate; count what the page gave
            if text:
                budget.add(len(text) + 2)
                parts.append(text)
    except (_Refused, MemoryError):
        raise
    except (PdfReadError, PyPdfError, ValueError, KeyError, TypeError, AttributeError, OSError) as exc:
        raise _Refused("unreadable", f"the PDF cannot be read: {exc}"[:300]) from exc
    except RecursionError as exc:
        raise _Refused("unreadable", "the PDF cannot be read: its objects nest too deeply") from exc
    return "\n\n".join(parts)


def html_text(raw: bytes, *, max_chars: int) -> str:
    from inscriptis import get_text  # in the parse child process only, as pypdf

    try:
        html = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise _Refused("unreadable", "text is not valid UTF-8") from exc
    text = get_text(html)
    _Budget(max_chars).add(len(text))
    return text


def main(argv: list[str]) -> int:
    mime_type, max_pages, max_chars, cpu_sec, memory_mb = argv[0], *map(int, argv[1:5])
    limit_self(cpu_sec=cpu_sec, memory_mb=memory_mb)
    raw = sys.stdin.buffer.read()
    try:
        if mime_type == PDF:
            text = pdf_text(raw, max_pages=max_pages, max_chars=max_chars)
        else:
            text = html_text(raw, max_chars=max_chars)
        # a lone surrogate (an odd font map) becomes U+FFFD: the answer is valid UTF-8
        text = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")
        answer: dict[str, str] = {"text": text}
    except _Refused as exc:
        answer = {"error": exc.error, "message": exc.message}
    except MemoryError:
        answer = {"error": "memory", "message": "the parser ran out of memory"}
    sys.stdout.buffer.write(json.dumps(answer, ensure_ascii=False).encode())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
