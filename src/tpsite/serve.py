"""Serve the built ``site/`` on localhost (``python build.py --serve``).

Only files below the site directory are served (``..`` and symlinks leading out are
refused), with the MIME types the runtime needs (``.wasm`` must be
``application/wasm`` for streaming compilation).  Like a static host (GitHub Pages), text
types and WebAssembly are sent gzip-compressed to clients that accept it, and a missing
file is answered with the site's ``404.html`` (status 404), so what is measured locally
(Lighthouse, byte counts) is what readers of the published site get.
"""

from __future__ import annotations

import email.utils
import functools
import gzip
import http.server
import io
import os
import posixpath
import sys
import threading
import urllib.parse
from pathlib import Path

MIME_TYPES = {
    ".wasm": "application/wasm",
    ".mjs": "text/javascript",
    ".js": "text/javascript",
    ".json": "application/json",
    ".whl": "application/zip",
    ".zip": "application/zip",
    ".html": "text/html; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".py": "text/plain; charset=utf-8",
    ".txt": "text/plain; charset=utf-8",
    ".svg": "image/svg+xml",
    ".tar": "application/x-tar",
    ".data": "application/octet-stream",
}


# Sent compressed (gzip level 6, what static hosts use); images, fonts and archives already are.
COMPRESSIBLE = ("text/", "application/javascript", "application/json", "application/wasm",
                "application/xml", "image/svg+xml")
GZIP_LEVEL = 6


_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _gzipped(path: str, mtime_ns: int, size: int) -> bytes:
    """Parallel first requests for one file (the 8 MB runtime) compress it once."""
    with _LOCKS_GUARD:
        lock = _LOCKS.setdefault(path, threading.Lock())
    with lock:
        return _gzipped_cached(path, mtime_ns, size)


@functools.lru_cache(maxsize=64)
def _gzipped_cached(path: str, mtime_ns: int, size: int) -> bytes:
    """gzip of a file, cached by (path, mtime, size): each file is compressed once."""
    with open(path, "rb") as fh:
        return gzip.compress(fh.read(), GZIP_LEVEL, mtime=0)


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    """Static files under ``directory`` only; no directory listings."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **MIME_TYPES}

    def send_head(self):
        """Files as SimpleHTTPRequestHandler sends them, or gzip-compressed when the client accepts it."""
        if self.server.watch is not None:
            watched = self._watch_head()
            if watched is not None:
                return watched
        path = self.translate_path(self.path)
        ctype = self.guess_type(path)
        if (os.path.isdir(path) or not os.path.isfile(path) or not ctype.startswith(COMPRESSIBLE)
                or not self._accepts_gzip()):
            return super().send_head()
        st = os.stat(path)
        if self._not_modified(st.st_mtime):
            self.send_response(304)
            self.end_headers()
            return None
        body = _gzipped(path, st.st_mtime_ns, st.st_size)
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Encoding", "gzip")
        self.send_header("Vary", "Accept-Encoding")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Last-Modified", self.date_time_string(int(st.st_mtime)))
        self.end_headers()
        return io.BytesIO(body)

    def _watch_head(self):
        """``--watch``: the reload script, the build's number, and every page with the script
        added before ``</body>`` (the files in the site are never changed)."""
        url = urllib.parse.urlsplit(self.path).path
        if url == WATCH_VERSION:
            return self._send_bytes(str(self.server.watch.version).encode(), "text/plain; charset=utf-8")
        if url == WATCH_SCRIPT:
            return self._send_bytes(RELOAD_JS.read_bytes(), "text/javascript")
        path = self.translate_path(self.path)
        if os.path.isdir(path):
            path = os.path.join(path, "index.html")
        if not path.endswith(".html") or not os.path.isfile(path):
            return None
        with open(path, "rb") as fh:
            page = fh.read()
        tag = f'<script src="{WATCH_SCRIPT}" data-version="{self.server.watch.version}"></script>'.encode()
        at = page.rfind(b"</body>")
        return self._send_bytes(page[:at] + tag + page[at:] if at >= 0 else page + tag, "text/html; charset=utf-8")

    def _send_bytes(self, body: bytes, ctype: str):
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        return io.BytesIO(body)

    def _not_modified(self, mtime: float) -> bool:
        """If-Modified-Since at or after the file's time (as SimpleHTTPRequestHandler answers)."""
        since = self.headers.get("If-Modified-Since")
        if not since or self.headers.get("If-None-Match"):
            return False
        try:
            return int(mtime) <= email.utils.parsedate_to_datetime(since).timestamp()
        except (TypeError, ValueError, IndexError, OverflowError):
            return False

    def _accepts_gzip(self) -> bool:
        for part in self.headers.get("Accept-Encoding", "").split(","):
            coding, _, params = part.strip().partition(";")
            if coding.strip().lower() in ("gzip", "*") and params.replace(" ", "") not in ("q=0", "q=0.0"):
                return True
        return False

    def send_error(self, code, message=None, explain=None):
        """A missing file: the site's 404.html with status 404, as a static host answers."""
        page = Path(self.directory) / "404.html"
        if code != 404 or not page.is_file():
            return super().send_error(code, message, explain)
        body = page.read_bytes()
        self.send_response(404, message)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def translate_path(self, path: str) -> str:
        """Map the URL path into the site; anything escaping it maps to a missing file."""
        path = urllib.parse.unquote(path.split("?", 1)[0].split("#", 1)[0], errors="replace")
        root = Path(self.directory).resolve()
        parts = [p for p in posixpath.normpath(path).split("/") if p and p not in (".", "..")]
        if any(os.sep in p or (os.altsep and os.altsep in p) for p in parts) or "\0" in path:
            return str(root / "__tp_outside__" / "refused")
        target = root.joinpath(*parts)
        try:
            resolved = target.resolve()
        except (OSError, RuntimeError):
            return str(root / "__tp_outside__" / "refused")
        if resolved != root and root not in resolved.parents:
            return str(root / "__tp_outside__" / "refused")
        if path.endswith("/") and not str(target).endswith(os.sep):
            return str(target) + os.sep
        return str(target)

    def list_directory(self, path):
        self.send_error(404, "Not found")
        return None

    def end_headers(self) -> None:
        self.send_header("Cache-Control", "no-cache")
        self.send_header("X-Content-Type-Options", "nosniff")
        super().end_headers()

    def log_message(self, fmt: str, *args) -> None:
        if self.server.verbose and not self.path.startswith(WATCH_VERSION):   # polled 10 times a second
            super().log_message(fmt, *args)


# build.py --serve --watch: the script every page gets, and the build number it polls.
WATCH_SCRIPT = "/__watch__/reload.js"
WATCH_VERSION = "/__watch__/version"
RELOAD_JS = Path(__file__).with_name("reload.js")


class WatchState:
    """The number of the build being served (``--watch``: one more after every rebuild)."""

    version = 0


class SiteServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    verbose = True
    watch: WatchState | None = None

    def handle_error(self, request, client_address) -> None:
        """A browser closing a connection mid-download is normal, not worth a traceback."""
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


def make_server(site_dir: str | Path, host: str = "127.0.0.1", port: int = 8000,
                verbose: bool = True, watch: WatchState | None = None) -> SiteServer:
    """A server for ``site_dir`` (port 0 picks a free port: see ``server.server_address``);
    ``watch``: pages reload when its version changes."""
    site_dir = Path(site_dir).resolve()
    if not (site_dir / "index.html").is_file():
        raise FileNotFoundError(f"{site_dir}/index.html does not exist: build the site first")
    handler = functools.partial(SiteHandler, directory=str(site_dir))
    server = SiteServer((host, port), handler)
    server.verbose = verbose
    server.watch = watch
    threading.Thread(target=_prewarm, args=(site_dir,), daemon=True).start()
    return server


def _prewarm(site_dir: Path, min_size: int = 256 * 1024) -> None:
    """Compress the large files (the runtime) now, not while a first page waits for them."""
    for path in sorted(site_dir.rglob("*")):
        ctype = SiteHandler.extensions_map.get(path.suffix.lower(), "")
        if path.is_file() and ctype.startswith(COMPRESSIBLE) and path.stat().st_size >= min_size:
            st = path.stat()
            _gzipped(str(path), st.st_mtime_ns, st.st_size)


def url_of(server: SiteServer) -> str:
    host, port = server.server_address[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def serve(site_dir: str | Path, host: str = "127.0.0.1", port: int = 8000) -> None:
    """Serve until interrupted, printing the URL first."""
    server = make_server(site_dir, host, port)
    print(f"Serving {site_dir} at {url_of(server)}  (Ctrl+C to stop)", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        print("stopped", file=sys.stderr)
    finally:
        server.server_close()
