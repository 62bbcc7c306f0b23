"""Helpers of the browser tests."""

from __future__ import annotations

from typing import Any


def admin_page(browser: Any, web: str, username: str, password: str) -> tuple[Any, list[str]]:
    """A page logged in to the admin as `username`, and the list its page errors are collected in."""
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(30_000)
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.goto(f"{web}/admin/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("input[type=submit]")
    page.wait_for_selector("#site-name")
    return page, problems
