"""The one reader of PEP 503 "simple" project pages, for every index the release talks to
(the local pypiserver, TestPyPI, PyPI): what refuse_existing, verify_served and the tests
see of an index."""

from __future__ import annotations

import re
import urllib.error
import urllib.parse
import urllib.request
from html.parser import HTMLParser


def normalized_name(project: str) -> str:
    """PEP 503's normalized project name: 'cuda_ext_example' -> 'cuda-ext-example'."""
    return re.sub(r"[-_.]+", "-", project).lower()


class _Anchors(HTMLParser):
    """(href, text) of every <a href> of a page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None
        self._text: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self._href = dict(attrs).get("href")
            self._text = []

    def handle_data(self, data):
        if self._href is not None:
            self._text.append(data)

    def handle_endtag(self, tag):
        if tag == "a" and self._href is not None:
            self.links.append((self._href, "".join(self._text).strip()))
            self._href = None


def project_files(simple_url: str, project: str, timeout: float = 30) -> dict[str, str]:
    """{file name: absolute download URL, without the #sha256=... fragment} from the
    index's PEP 503 page for `project`; {} when the index has no such project (404)."""
    page_url = f"{simple_url.rstrip('/')}/{normalized_name(project)}/"
    try:
        with urllib.request.urlopen(page_url, timeout=timeout) as response:
            page = response.read().decode()
    except urllib.error.HTTPError as err:
        if err.code == 404:
            return {}
        raise
    parser = _Anchors()
    parser.feed(page)
    parser.close()
    return {
        name: urllib.parse.urljoin(page_url, urllib.parse.urldefrag(href).url)
        for href, name in parser.links
        if name
    }
