"""The local server of ``python build.py --serve``: MIME types, no escape from site/."""

from __future__ import annotations

import http.client
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from site_fixture import ROOT, make_content  # noqa: E402
from tpsite.serve import make_server, url_of  # noqa: E402

SECRET = "top secret outside the site"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("serve")
    site = tmp_path / "site"
    (site / "static" / "pyodide").mkdir(parents=True)
    (site / "index.html").write_text("<!DOCTYPE html><title>x</title>", encoding="utf-8")
    files = {"static/pyodide/pyodide.asm.wasm": b"\0asm\1\0\0\0", "static/pyodide/pyodide.mjs": b"export {}",
             "static/app.js": b"1", "static/pyodide/pyodide-lock.json": b"{}",
             "static/tpmath-0.1.0-py3-none-any.whl": b"PK", "static/pyodide/python_stdlib.zip": b"PK",
             "static/style.css": b"a{}" * 500, "en/index.html": b"<p>en</p>",
             "404.html": b"<!DOCTYPE html><title>not found</title>", "static/preview/en/index.png": b"\x89PNG" * 50}
    for rel, data in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_bytes(data)
    (tmp_path / "secret.txt").write_text(SECRET, encoding="utf-8")
    os.symlink(tmp_path / "secret.txt", site / "static" / "link.txt")
    srv = make_server(site, "127.0.0.1", 0, verbose=False)
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv
    srv.shutdown()
    srv.server_close()


def get(srv, path: str) -> tuple[int, dict, bytes]:
    host, port = srv.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.putrequest("GET", path, skip_accept_encoding=True)   # the raw path, unnormalised
        conn.endheaders()
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


@pytest.mark.parametrize("path, mime", [
    ("/static/pyodide/pyodide.asm.wasm", "application/wasm"),
    ("/static/pyodide/pyodide.mjs", "text/javascript"),
    ("/static/app.js", "text/javascript"),
    ("/static/pyodide/pyodide-lock.json", "application/json"),
    ("/static/tpmath-0.1.0-py3-none-any.whl", "application/zip"),
    ("/static/pyodide/python_stdlib.zip", "application/zip"),
    ("/static/style.css", "text/css"),
    ("/en/index.html", "text/html"),
])
def test_mime_types(server, path, mime):
    status, headers, body = get(server, path)
    assert status == 200
    assert headers["content-type"].split(";")[0] == mime
    assert headers["x-content-type-options"] == "nosniff"
    assert body


def test_directory_serves_index(server):
    status, headers, body = get(server, "/")
    assert status == 200 and body.startswith(b"<!DOCTYPE html>")
    status, headers, _ = get(server, "/en")
    assert status == 301 and headers["location"].endswith("/en/")


@pytest.mark.parametrize("path", [
    "/../secret.txt", "/static/../../secret.txt", "/%2e%2e/secret.txt", "/static/%2e%2e/%2e%2e/secret.txt",
    "/..%2fsecret.txt", "/static/link.txt", "/static/..%5c..%5csecret.txt", "/%00", "//etc/passwd",
])
def test_nothing_outside_the_site(server, path):
    status, _, body = get(server, path)
    assert status == 404, (path, status)
    assert SECRET.encode() not in body


def test_no_directory_listing(server):
    status, _, body = get(server, "/static/")
    assert status == 404
    assert b"app.js" not in body


def test_url_is_printed_for_localhost(server):
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/", url_of(server))


def test_build_then_serve_cli(tmp_path):
    """``build.py --serve --port 0`` builds, prints the URL, and serves the built site."""
    content = make_content(tmp_path / "content")
    out = tmp_path / "site"
    proc = subprocess.Popen([sys.executable, str(ROOT / "build.py"), "--content", str(content), "--out", str(out),
                             "--runtime", "none", "--serve", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and url is None:
            line = proc.stdout.readline()
            if not line:
                break
            m = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
            url = m.group(1) if m else None
        assert url, proc.stderr.read() if proc.poll() is not None else "no URL printed"
        host, port = url[7:-1].split(":")
        conn = http.client.HTTPConnection(host, int(port), timeout=10)
        conn.request("GET", "/zh/index.html")
        resp = conn.getresponse()
        body = resp.read().decode("utf-8")
        assert resp.status == 200 and '<html lang="zh-CN"' in body
        conn.close()
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        proc.stdout.close()
        proc.stderr.close()


def get_with(srv, path: str, headers: dict, method: str = "GET") -> tuple[int, dict, bytes]:
    host, port = srv.server_address[:2]
    conn = http.client.HTTPConnection(host, port, timeout=10)
    try:
        conn.request(method, path, headers=headers)
        resp = conn.getresponse()
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read()
    finally:
        conn.close()


@pytest.mark.parametrize("path", ["/static/style.css", "/static/pyodide/pyodide.asm.wasm", "/en/index.html",
                                  "/static/pyodide/pyodide-lock.json", "/static/app.js"])
def test_text_and_wasm_are_gzipped_like_a_static_host(server, path):
    import gzip
    site = Path(server.RequestHandlerClass.keywords["directory"])
    status, headers, body = get_with(server, path, {"Accept-Encoding": "gzip, deflate, br"})
    assert status == 200 and headers["content-encoding"] == "gzip" and "accept-encoding" in headers["vary"].lower()
    assert int(headers["content-length"]) == len(body)
    assert gzip.decompress(body) == (site / path.lstrip("/")).read_bytes()
    status, headers, body = get_with(server, path, {"Accept-Encoding": "identity"})
    assert status == 200 and "content-encoding" not in headers
    assert body == (site / path.lstrip("/")).read_bytes()
    status, headers, body = get_with(server, path, {"Accept-Encoding": "gzip"}, method="HEAD")
    assert status == 200 and headers["content-encoding"] == "gzip" and body == b""


@pytest.mark.parametrize("path", ["/static/tpmath-0.1.0-py3-none-any.whl", "/static/preview/en/index.png"])
def test_compressed_formats_are_sent_as_they_are(server, path):
    status, headers, body = get_with(server, path, {"Accept-Encoding": "gzip"})
    assert status == 200 and "content-encoding" not in headers


def test_missing_file_gets_the_sites_404_page(server):
    status, headers, body = get_with(server, "/no/such/page.html", {})
    assert status == 404 and headers["content-type"].startswith("text/html")
    assert body == b"<!DOCTYPE html><title>not found</title>"


def test_gzipped_file_answers_if_modified_since(server):
    status, headers, _ = get_with(server, "/static/style.css", {"Accept-Encoding": "gzip"})
    status, _, body = get_with(server, "/static/style.css", {"Accept-Encoding": "gzip",
                                                             "If-Modified-Since": headers["last-modified"]})
    assert status == 304 and body == b""
