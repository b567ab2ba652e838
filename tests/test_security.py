"""Security of the built site and the dev server (issue 7, parts 4 and 5).

- Every built HTML file (``build.py --runtime local`` and ``--runtime cdn``), parsed: a
  Content-Security-Policy ``<meta>`` before anything it governs, no inline script (only
  ``src=`` scripts and JSON data blocks that cannot close their element), no inline event
  handler or ``javascript:`` URL, no ``style`` attribute; ``'wasm-unsafe-eval'`` exactly on the
  pages that start Pyodide; never ``'unsafe-inline'`` / ``'unsafe-eval'``.
- The page scripts never turn strings into markup or code (no innerHTML & co.), and in Chromium
  a hostile URL query is not parsed as HTML (control values: tests/test_hardening_browser.py).
- ``python build.py --serve`` binds 127.0.0.1 by default (not reachable on another interface)
  and serves only site/: traversal, encoded and double-encoded dots, symlinks out of the site.
- A Jinja template error, through ``python build.py``: non-zero exit naming template and line,
  previous site intact.
"""

from __future__ import annotations

import html.parser
import http.client
import inspect
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from site_fixture import tree_hashes

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from tpsite import serve as tp_serve  # noqa: E402

STATIC = ROOT / "templates" / "static"
SCRIPTS = sorted(p.relative_to(STATIC).as_posix() for p in STATIC.rglob("*.js"))   # app.js, js/*.js, …
SINKS = re.compile(r"\b(innerHTML|outerHTML|insertAdjacentHTML|document\.write(ln)?|srcdoc|createContextualFragment"
                   r"|DOMParser|eval\s*\(|new\s+Function|setTimeout\s*\(\s*['\"`]|setInterval\s*\(\s*['\"`])")


# ---- parsing every built page -----------------------------------------------------------------

class Page(html.parser.HTMLParser):
    """Every start tag in order (name, attrs) and the raw text of each <script>."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self._script: dict | None = None

    def handle_starttag(self, tag, attrs):
        attrs = {k.lower(): (v or "") for k, v in attrs}
        self.tags.append((tag, attrs))
        if tag == "script":
            self._script = attrs
            self.scripts.append((attrs, ""))

    def handle_startendtag(self, tag, attrs):
        self.tags.append((tag, {k.lower(): (v or "") for k, v in attrs}))

    def handle_data(self, data):
        if self._script is not None:
            attrs, text = self.scripts[-1]
            self.scripts[-1] = (attrs, text + data)

    def handle_endtag(self, tag):
        if tag == "script":
            self._script = None


def parse(path: Path) -> Page:
    p = Page()
    p.feed(path.read_text(encoding="utf-8"))
    p.close()
    return p


def csp_of(page: Page) -> tuple[int, dict[str, list[str]]]:
    metas = [(i, a) for i, (t, a) in enumerate(page.tags)
             if t == "meta" and a.get("http-equiv", "").lower() == "content-security-policy"]
    assert len(metas) == 1, "exactly one CSP <meta>"
    i, attrs = metas[0]
    policy = {}
    for part in attrs["content"].split(";"):
        words = part.split()
        if words:
            policy[words[0]] = words[1:]
    return i, policy


@pytest.fixture(scope="module")
def cdn_site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("cdn-sec") / "site"
    proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "--runtime", "cdn", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.parametrize("mode", ["local", "cdn"])
def test_every_page_has_a_strict_csp_and_no_inline_code(mode, built_site, cdn_site):
    site = built_site if mode == "local" else cdn_site
    pages = sorted(site.rglob("*.html"))
    assert len(pages) >= 5, pages   # the language choice + 2 pages x 2 languages
    with_runtime = 0
    for path in pages:
        rel = path.relative_to(site).as_posix()
        page = parse(path)
        at, policy = csp_of(page)
        # The policy must come before anything it governs.
        first = next(i for i, (t, _) in enumerate(page.tags) if t in ("script", "link", "style", "img"))
        assert at < first, f"{rel}: CSP <meta> after <{page.tags[first][0]}>"
        assert policy["default-src"] == ["'self'"] and policy["object-src"] == ["'none'"], rel
        assert policy["base-uri"] == ["'self'"], rel
        words = {w for v in policy.values() for w in v}
        assert not words & {"'unsafe-inline'", "'unsafe-eval'", "*", "http:", "https:", "data:"} - (
            {"data:"} if policy.get("img-src") and "data:" in policy["img-src"] else set()), (rel, policy)
        assert "data:" not in policy["script-src"] and "blob:" not in policy["script-src"], rel
        for tag, attrs in page.tags:
            handlers = [k for k in attrs if k.startswith("on")]
            assert not handlers, f"{rel}: <{tag} {handlers}>"
            assert "style" not in attrs, f"{rel}: style attribute on <{tag}>"
            for k in ("href", "src", "action", "formaction"):
                assert not attrs.get(k, "").strip().lower().startswith(("javascript:", "data:text/html")), \
                    f"{rel}: <{tag} {k}={attrs[k]!r}>"
        assert not any(t == "style" for t, _ in page.tags), rel
        for attrs, text in page.scripts:
            if "src" in attrs:
                assert text.strip() == "", f"{rel}: script with src and a body"
                src = attrs["src"]
                assert not re.match(r"[a-z]+:", src), f"{rel}: script from {src}"
                assert (path.parent / src).resolve().is_file(), f"{rel}: {src} missing"
            else:
                assert attrs.get("type") == "application/json", f"{rel}: inline script {attrs}"
                assert "<" not in text, f"{rel}: '<' in a JSON data block could close it"
                json.loads(text)
        pyodide = next((a.get("content", "") for t, a in page.tags if t == "meta" and a.get("name") == "tp-pyodide"),
                       None)
        runs_python = bool(pyodide)
        with_runtime += runs_python
        assert ("'wasm-unsafe-eval'" in policy["script-src"]) == runs_python, (rel, policy["script-src"])
        if mode == "local" or not runs_python:
            assert all(v == ["'self'"] or k in ("img-src", "object-src") or v == ["'self'", "'wasm-unsafe-eval'"]
                       for k, v in policy.items()), (rel, policy)
        else:   # exactly the CDN origin, for scripts and fetches
            assert policy["script-src"] == ["'self'", "'wasm-unsafe-eval'", "https://cdn.jsdelivr.net"], rel
            assert policy["connect-src"] == ["'self'", "https://cdn.jsdelivr.net"], rel
    contents = sum(p.name == "contents.html" for p in pages)
    assert contents == 2
    assert with_runtime == len(pages) - 2 - contents, \
        "every content page starts Pyodide; the language choice, 404 and the contents pages do not"


def test_page_scripts_never_turn_strings_into_markup_or_code():
    found = []
    assert {"app.js", "lang.js", "worker.js", "js/tree.js", "js/runtime.js"} <= set(SCRIPTS), SCRIPTS
    for name in SCRIPTS:
        text = (STATIC / name).read_text(encoding="utf-8")
        code = re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)     # comments may mention them
        found += [f"{name}: {m.group(0)}" for m in SINKS.finditer(code)]
    assert found == [], found
    # The check above would catch these (it is not vacuous).
    assert SINKS.search("el.innerHTML = x") and SINKS.search("el.insertAdjacentHTML('a', x)")


@pytest.mark.browser
def test_hostile_url_query_is_never_parsed_as_html(new_context, site_url, built_site):
    """Every page, both languages: query keys, values and hash carry an HTML payload."""
    payload = '"><img src=x onerror="window.__tpPwned=1"><script>window.__tpPwned=2</script>'
    ctx = new_context()
    ctx.route("**/pyodide/**", lambda route: route.abort())     # URL restore runs before Python
    from urllib.parse import quote
    checked = 0
    for path in sorted(built_site.glob("*/*.html")) + [built_site / "index.html"]:
        rel = path.relative_to(built_site).as_posix()
        keys = sorted({m for m in re.findall(r'<(?:select|input)\b[^>]*\bname="([^"]+)"', path.read_text(encoding="utf-8"))})
        query = "&".join(f"{quote(k)}={quote(payload)}" for k in keys + [payload]) + "&choose"
        page = ctx.new_page()
        errors = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(f"{site_url}{rel}?{query}#{quote(payload)}")
        page.wait_for_load_state("load")
        assert page.evaluate("window.__tpPwned === undefined"), rel
        assert page.evaluate("document.querySelectorAll('img, body script:not([src]):not([type])').length") == 0, rel
        # Controls kept allowed values (a select refuses the payload; a number input sanitises it).
        values = page.eval_on_selector_all("form.controls [name]", "els => els.map(e => e.value)")
        assert payload not in values, rel
        for href in page.eval_on_selector_all("a[href]", "els => els.map(a => a.getAttribute('href'))"):
            assert not href.lower().startswith("javascript:"), (rel, href)
        assert errors == [], (rel, errors)
        checked += len(keys) + 1
        page.close()
    assert checked > 40


# ---- the dev server ---------------------------------------------------------------------------

def test_dev_server_binds_localhost_by_default():
    assert inspect.signature(tp_serve.make_server).parameters["host"].default == "127.0.0.1"
    assert inspect.signature(tp_serve.serve).parameters["host"].default == "127.0.0.1"
    out = subprocess.run([sys.executable, str(ROOT / "build.py"), "--help"], capture_output=True, text=True,
                         cwd=ROOT).stdout
    assert re.search(r"--host HOST\s+address to serve on \(default: 127\.0\.0\.1\)", out), out


def _other_address() -> str | None:
    """An address of this machine that is not loopback (None when there is none)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("10.255.255.255", 1))     # no packet is sent: this only picks a route
            ip = s.getsockname()[0]
        except OSError:
            return None
    return None if ip.startswith("127.") or ip == "0.0.0.0" else ip


@pytest.fixture(scope="module")
def jail(tmp_path_factory):
    """A served site/ with symlinks leading out of it (a file and a directory), and a secret outside."""
    tmp = tmp_path_factory.mktemp("jail")
    site = tmp / "site"
    (site / "en").mkdir(parents=True)
    (site / "index.html").write_text("<!DOCTYPE html><title>in</title>", encoding="utf-8")
    (site / "en" / "index.html").write_text("<p>en</p>", encoding="utf-8")
    (tmp / "outside").mkdir()
    (tmp / "outside" / "secret.txt").write_text("SECRET-OUTSIDE", encoding="utf-8")
    (tmp / "site-old").mkdir()                    # a sibling whose name starts like the site's
    (tmp / "site-old" / "secret.txt").write_text("SECRET-OUTSIDE", encoding="utf-8")
    os.symlink(tmp / "outside", site / "en" / "dirlink")
    os.symlink(tmp / "outside" / "secret.txt", site / "en" / "filelink.txt")
    os.symlink("../../outside/secret.txt", site / "en" / "relative-link.txt")
    os.symlink("/etc/passwd", site / "passwd")
    srv = tp_serve.make_server(site, port=0, verbose=False)   # default host (127.0.0.1), any free port
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


def _get(srv, path: str) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", srv.server_address[1], timeout=10)
    try:
        conn.putrequest("GET", path, skip_accept_encoding=True)
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def test_dev_server_is_not_reachable_from_other_interfaces(jail):
    assert jail.server_address[0] == "127.0.0.1"
    assert _get(jail, "/en/index.html") == (200, b"<p>en</p>")
    other = _other_address()
    if other is None:
        pytest.skip("this machine has no non-loopback IPv4 address to try")
    with pytest.raises(OSError):
        socket.create_connection((other, jail.server_address[1]), timeout=3).close()


@pytest.mark.parametrize("path", [
    "/../outside/secret.txt", "/en/../../outside/secret.txt", "/%2e%2e/outside/secret.txt",
    "/%2E%2E/outside/secret.txt", "/en/%2e%2e/%2e%2e/outside/secret.txt", "/%2e%2e%2foutside%2fsecret.txt",
    "/..%2f..%2foutside%2fsecret.txt", "/%252e%252e/outside/secret.txt", "/en/..%5c..%5coutside%5csecret.txt",
    "/..\\outside\\secret.txt", "/en/dirlink/secret.txt", "/en/filelink.txt", "/en/relative-link.txt",
    "/passwd", "/../site-old/secret.txt", "/%2e%2e/site-old/secret.txt", "/en/dirlink/", "/en/%00",
    "//etc/passwd", "/./../outside/secret.txt", "/en/.%2e/.%2e/outside/secret.txt",
])
def test_dev_server_serves_nothing_outside_site(jail, path):
    status, body = _get(jail, path)
    assert status in (400, 404), (path, status)
    assert b"SECRET-OUTSIDE" not in body and b"root:" not in body


# ---- a template error, through `python build.py` --------------------------------------------------

@pytest.mark.parametrize("template, line, broken", [
    ("page.html", 5, "{% if %}"),                      # syntax error
    ("page.html", 7, "{{ page.title.nope() }}"),       # error while rendering a page
    ("demo.html", 3, "{{ d.name.nope() }}"),           # ... inside a macro called from Python
])
def test_template_error_names_file_and_line_and_keeps_site(tmp_path, template, line, broken):
    """A copy of the builder and templates (the real ones are not touched), run as a subprocess."""
    for name in ("build.py", "src", "templates"):
        src = ROOT / name
        (shutil.copytree(src, tmp_path / name, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
         if src.is_dir() else shutil.copyfile(src, tmp_path / name))
    shutil.copytree(ROOT / "content", tmp_path / "content")    # the real pages: they have demo blocks
    out = tmp_path / "site"
    cmd = [sys.executable, "build.py", "--runtime", "none", "--out", str(out)]
    first = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    before = tree_hashes(out)
    path = tmp_path / "templates" / template
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[line - 1] = broken + lines[line - 1]
    path.write_text("".join(lines), encoding="utf-8")
    proc = subprocess.run(cmd, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode != 0
    assert re.search(rf"templates/{re.escape(template)}:{line}: template error: ", proc.stderr), proc.stderr
    assert "Traceback" not in proc.stderr
    assert tree_hashes(out) == before, "a failed build must leave the previous site intact"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["build.py", "content", "site", "src", "templates"]
