"""Serve the built ``site/`` on localhost (``python build.py --serve``).

Only files below the site directory are served (``..`` and symlinks leading out are
refused), with the MIME types the runtime needs (``.wasm`` must be
``application/wasm`` for streaming compilation).
"""

from __future__ import annotations

import functools
import http.server
import os
import posixpath
import sys
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


class SiteHandler(http.server.SimpleHTTPRequestHandler):
    """Static files under ``directory`` only; no directory listings."""

    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, **MIME_TYPES}

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
        if self.server.verbose:
            super().log_message(fmt, *args)


class SiteServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    verbose = True

    def handle_error(self, request, client_address) -> None:
        """A browser closing a connection mid-download is normal, not worth a traceback."""
        if isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            return
        super().handle_error(request, client_address)


def make_server(site_dir: str | Path, host: str = "127.0.0.1", port: int = 8000,
                verbose: bool = True) -> SiteServer:
    """A server for ``site_dir`` (port 0 picks a free port: see ``server.server_address``)."""
    site_dir = Path(site_dir).resolve()
    if not (site_dir / "index.html").is_file():
        raise FileNotFoundError(f"{site_dir}/index.html does not exist: build the site first")
    handler = functools.partial(SiteHandler, directory=str(site_dir))
    server = SiteServer((host, port), handler)
    server.verbose = verbose
    return server


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
