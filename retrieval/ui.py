"""Browser page of DRIFT search (/ui/drift/).

The page is a static shell: the script asks for an API key (kept in the tab's sessionStorage),
lists the key's projects, posts to /retrieve and follows the search on the project's progress
websocket. The server renders no data into it, so the policy below allows nothing but the page's
own script and style files and connections back to this host.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET


def content_security_policy(host: str) -> str:
    return "; ".join(
        [
            "default-src 'none'",
            "script-src 'self'",
            "style-src 'self'",
            "img-src 'self' data:",
            f"connect-src 'self' ws://{host} wss://{host}",
            "base-uri 'none'",
            "form-action 'none'",
            "frame-ancestors 'none'",
        ]
    )


@require_GET
def drift_page(request: HttpRequest) -> HttpResponse:
    response = render(request, "ui/drift.html")
    response["Content-Security-Policy"] = content_security_policy(request.get_host())
    response["Referrer-Policy"] = "no-referrer"
    return response
