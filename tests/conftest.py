"""Shared fixtures: a built site (``--runtime local``), a 127.0.0.1 server, real Chromium.

Everything is session-scoped so the site is built once and Chromium starts once;
each page load still boots Pyodide in its own worker, so browser tests reuse
pages where they can.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import http.server
import os
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"]


def _build_local(out: Path) -> None:
    proc = subprocess.run([sys.executable, str(ROOT / "build.py"), "--runtime", "local", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"build failed:\n{proc.stdout}\n{proc.stderr}"


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory) -> Path:
    """A directory every pytest-xdist worker of this run shares (the run's temporary directory
    without workers): what a fixture makes once for all of them is left there, under a lock."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def locked(path: Path):
    """Hold an exclusive lock on ``path`` (made if missing) while the block runs: one worker
    makes a shared thing while the others wait for it."""
    with open(path, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _shared_build(out: Path, make) -> Path:
    """``make(out)`` once per run: under pytest-xdist (``-n``) the first worker builds under a
    lock and the others find the finished site (the builder swaps it in at once)."""
    with locked(out.with_suffix(".lock")):
        if not (out / "index.html").is_file():
            make(out)
    return out


@pytest.fixture(scope="session")
def built_site(run_dir) -> Path:
    """``python build.py --runtime local`` into a temporary directory (the real site/ is untouched),
    once per run; the tests only read it."""
    return _shared_build(run_dir / "built-site", _build_local)


@pytest.fixture(scope="session")
def static_site(run_dir) -> Path:
    """The real content built with ``--runtime none`` (in process), once per run for every file
    that reads the static pages (each used to build its own); the tests only read it."""
    from tpsite.build import build  # noqa: PLC0415
    return _shared_build(run_dir / "static-site", lambda out: build(out, runtime="none", quiet=True))


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".wasm": "application/wasm", ".mjs": "text/javascript", ".whl": "application/zip"}

    def log_message(self, *args):  # keep pytest output clean
        pass


def _make_server(directory: Path):
    """tpsite.serve's server when the builder provides one, else a stdlib static server."""
    try:
        from tpsite import serve as tp_serve  # noqa: PLC0415
        make = getattr(tp_serve, "make_server", None)
    except ImportError:
        make = None
    if make is not None:
        return make(directory, "127.0.0.1", 0, verbose=False)
    handler = functools.partial(_QuietHandler, directory=str(directory))
    return http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)


@pytest.fixture(scope="session")
def serve_dir():
    """Factory: serve a directory on 127.0.0.1 from a thread; returns its base URL (ending in /)."""
    servers = []

    def serve(directory: Path) -> str:
        server = _make_server(directory)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}/"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="session")
def site_url(built_site, serve_dir) -> str:
    """Base URL of the ``--runtime local`` site."""
    return serve_dir(built_site)


@pytest.fixture(scope="session")
def browser():
    """One headless Debian Chromium for the whole session (never `playwright install`)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: run bash scripts/setup.sh (apt-get install chromium)")
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


class RequestLog:
    """Every request any page or worker of a context makes."""

    def __init__(self):
        self.urls: list[str] = []

    def record(self, request) -> None:
        self.urls.append(request.url)

    def foreign(self) -> list[str]:
        """Requests to anything but 127.0.0.1 (data:/blob: URLs never touch the network)."""
        return [u for u in self.urls
                if urlsplit(u).scheme not in ("data", "blob") and urlsplit(u).hostname != "127.0.0.1"]


@pytest.fixture(scope="session")
def request_log() -> RequestLog:
    return RequestLog()


@pytest.fixture(scope="session")
def new_context(browser, request_log):
    """Factory of browser contexts that log every request into the session's request log.  When the
    session ends, no request of any of them may have left 127.0.0.1 (an error of the last test
    otherwise): under pytest-xdist each worker checks its own contexts, so every context is."""
    contexts = []

    def make(**kwargs):
        ctx = browser.new_context(**kwargs)
        ctx.on("request", request_log.record)
        contexts.append(ctx)
        return ctx

    yield make
    for ctx in contexts:
        ctx.close()
    assert request_log.foreign() == [], request_log.foreign()


# ---- tables a test hands to the end of the run (tests/test_benchmarks.py: the benchmark table)
# A test records ``record_property("benchmark_table", text)``; the text is printed once the run
# ends, after the summary.  Through the report, so it also reaches the log from a pytest-xdist
# worker, whose own output pytest does not show.
_TABLES: list[str] = []


def pytest_runtest_logreport(report):
    if report.when == "call":
        _TABLES.extend(value for name, value in report.user_properties if name == "benchmark_table")


def pytest_terminal_summary(terminalreporter):
    for text in _TABLES:
        terminalreporter.write_sep("-", "benchmarks/run.py --smoke")
        terminalreporter.write_line(text)


# ---- order: the files that start browsers or torchrun first
# Under pytest-xdist (-n, --dist loadfile) a worker takes the next whole file when it is free;
# with the long files first, the workers end together on short ones instead of one worker
# finishing a long file alone.  Within a file the order is unchanged (a stable sort).
# The benchmark smoke run (about two minutes in one test's set-up) goes first of all: last, it ran
# alone on one worker while the others had finished (a -n 3 run on 2 cores).
def pytest_collection_modifyitems(items):
    def late(item) -> tuple[bool, bool]:
        return (item.path.name != "test_benchmarks.py",
                not (item.get_closest_marker("browser") or item.get_closest_marker("torch")))
    items.sort(key=late)
