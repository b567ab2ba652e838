"""The in-browser Python runtime: Pyodide 0.27.7 + numpy 2.0.2.

Three modes of ``build.py --runtime``:

- ``local``: copy the runtime from the cache that ``scripts/fetch_runtime.py``
  fills (outside the work tree) into ``site/pyodide/``; every file is checked
  against its sha256 first (core files against the hashes pinned below, which
  the fetch script also records in the cache's ``SHA256SUMS``; the numpy wheel
  against the official ``pyodide-lock.json``).
- ``cdn``: point the pages at the official CDN copy of the same version.
- ``none``: no runtime; the pages keep their build-time tables.

This module is also imported by ``scripts/fetch_runtime.py`` so the pinned
values exist in one place only.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

PYODIDE_VERSION = "0.27.7"
CDN_BASE = f"https://cdn.jsdelivr.net/pyodide/v{PYODIDE_VERSION}/full/"

# sha256 of the files of npm ``pyodide@0.27.7`` the site needs (the npm tarball
# itself is checked against the registry's sha512 integrity by the fetch script).
CORE_SHA256 = {
    "pyodide.js": "b4cb23a53aba19c221659b9fb40a2f18281d685691dc06647fb0afd0681baf98",
    "pyodide.mjs": "04c052c815abb0bf2981fa38c2dfa58e3120ee5288c956df2b2a15e301782c5f",
    "pyodide.asm.js": "6b4c90de5b7172873f04f21884d0e9d2274e305fe32116558fe3e4fbe3618d51",
    "pyodide.asm.wasm": "a50dd1843f805a0b7c45b61037ee0d7b26dfe85efe0e18ef95a34ad24e401f5f",
    "python_stdlib.zip": "16611534726e5d8ac2bd8f926410b2dcb8d6f49aa24913463533b457a2115c16",
    "pyodide-lock.json": "9c45b916001a750f4102fc287494f3eab215909c7535c626a20db80fd6333e2c",
}
NPM_INTEGRITY = ("sha512-RUSVJlhQdfWfgO9hVHCiXoG+nVZQRS5D9FzgpLJ/VcgGBLSAKoPL8kTiOikxbHQm1kR"
                 "ISeWUBdulEgO26qpSRA==")
# The packages the worker loads, by their name in pyodide-lock.json.
PACKAGES = ("numpy",)
NUMPY_WHEEL = "numpy-2.0.2-cp312-cp312-pyodide_2024_0_wasm32.whl"
NUMPY_SHA256 = "ebb61241d962b98b21597d7ce43b67668a6d5bab3acec4fbe958657320d7cd08"
# Sizes of the files the worker loads (exact for the pinned hashes; gzip: level 6, what static
# hosts and build.py --serve send, about).  The page shows the download size (Save-Data) and the
# progress bar counts the fetched bytes against their total.  tests/test_runtime_files.py checks them.
FILE_BYTES = {                       # name: (bytes, gzip bytes)
    "pyodide.js": (14913, 6018),
    "pyodide.asm.js": (1255688, 236098),
    "pyodide.asm.wasm": (10105545, 3169703),
    "python_stdlib.zip": (2360737, 2321002),
    "pyodide-lock.json": (112205, 26234),
    NUMPY_WHEEL: (3061133, 3026751),
}
# Every file the worker loads is fetched (pyodide.js and pyodide.asm.js too: fetched, then run
# from the fetched bytes, so their chunks count), so all of them are in the counted total.
FETCHED = ("pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip", "pyodide-lock.json", NUMPY_WHEEL)
MANIFEST = "SHA256SUMS"
# The memory snapshot a reader's worker makes on the first visit and restores on later ones
# (worker.js) holds this exact interpreter: its Cache Storage key names the version and the wasm
# and stdlib hashes, so a page with another runtime never restores it.  Bump SNAPSHOT_FORMAT when
# what the worker does before taking it changes.
SNAPSHOT_FORMAT = 1
FETCH_HINT = "run python3 scripts/fetch_runtime.py"


class RuntimeFilesError(RuntimeError):
    """The runtime cache is missing, incomplete, or a file's hash is wrong."""


def cache_dir() -> Path:
    """The runtime cache: ``$TP_RUNTIME_CACHE`` or ``~/.cache/tp-explained/pyodide-0.27.7/``."""
    env = os.environ.get("TP_RUNTIME_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "tp-explained" / f"pyodide-{PYODIDE_VERSION}"


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in chunks (the wasm file is 10 MB)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def lock_packages(lock_path: Path) -> dict[str, str]:
    """``{file_name: sha256}`` of the packages in :data:`PACKAGES`, from pyodide-lock.json."""
    lock = json.loads(lock_path.read_text(encoding="utf-8"))
    if lock.get("info", {}).get("version") != PYODIDE_VERSION:
        raise RuntimeFilesError(f"{lock_path}: not the pyodide-lock.json of Pyodide {PYODIDE_VERSION}")
    out = {}
    for name in PACKAGES:
        pkg = lock["packages"][name]
        out[pkg["file_name"]] = pkg["sha256"]
    return out


def expected_hashes(cache: Path) -> dict[str, str]:
    """Every runtime file the site needs and its expected sha256.

    Core files: pinned values (and they must agree with the ``SHA256SUMS`` the
    fetch script recorded).  Package wheels: the official lock file, whose own
    hash is pinned, and whose numpy entry must equal the value in design.md.
    """
    recorded = read_manifest(cache / MANIFEST)
    for name, digest in CORE_SHA256.items():
        if recorded.get(name) != digest:
            raise RuntimeFilesError(
                f"runtime cache {cache}: {MANIFEST} records {recorded.get(name)!r} for {name}, "
                f"expected {digest}; {FETCH_HINT}")
    lock = cache / "pyodide-lock.json"
    check_file(lock, CORE_SHA256["pyodide-lock.json"])
    packages = lock_packages(lock)
    if packages.get(NUMPY_WHEEL) != NUMPY_SHA256:
        raise RuntimeFilesError(f"{lock}: numpy entry is {packages.get(NUMPY_WHEEL)!r}, expected {NUMPY_SHA256}")
    return {**CORE_SHA256, **packages}


def read_manifest(path: Path) -> dict[str, str]:
    """Parse a ``sha256sum``-style file into ``{name: digest}``."""
    if not path.is_file():
        raise RuntimeFilesError(f"runtime cache is missing or incomplete ({path} not found); {FETCH_HINT}")
    out = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            digest, name = line.split(maxsplit=1)
            out[name.strip()] = digest
    return out


def check_file(path: Path, digest: str) -> None:
    """Raise :class:`RuntimeFilesError` unless ``path`` exists with sha256 ``digest``."""
    if not path.is_file():
        raise RuntimeFilesError(f"runtime file {path} is missing; {FETCH_HINT}")
    actual = sha256_file(path)
    if actual != digest:
        raise RuntimeFilesError(f"runtime file {path} has sha256 {actual}, expected {digest}; "
                                f"delete it and {FETCH_HINT}")


def verify_cache(cache: Path | None = None) -> dict[str, str]:
    """Check every runtime file in the cache; return ``{name: sha256}``."""
    cache = cache_dir() if cache is None else cache
    if not cache.is_dir():
        raise RuntimeFilesError(f"runtime cache {cache} not found; {FETCH_HINT}")
    hashes = expected_hashes(cache)
    for name, digest in sorted(hashes.items()):
        check_file(cache / name, digest)
    return hashes


def snapshot_config() -> dict:
    """What a page tells its worker about the memory snapshot: the cache key, and the numpy
    wheel it unpacks by hand after a restore (with the lock file's sha256, checked first)."""
    key = (f"pyodide-{PYODIDE_VERSION}-wasm-{CORE_SHA256['pyodide.asm.wasm'][:16]}"
           f"-stdlib-{CORE_SHA256['python_stdlib.zip'][:16]}-v{SNAPSHOT_FORMAT}")
    return {"key": key, "numpy": NUMPY_WHEEL, "numpy_sha256": NUMPY_SHA256}


def install_runtime(out_dir: Path, mode: str) -> dict:
    """Provide the runtime for the site in ``out_dir`` (``site/``).

    Returns ``{"mode", "pyodide_base", "csp_extra", "fetched_bytes", "download_bytes", "snapshot"}``.  ``pyodide_base`` is
    either relative to the site root (``"pyodide/"``, local mode: prefix it
    with the page's path to the root, e.g. ``"../pyodide/"`` for
    ``site/en/index.html``), absolute (the CDN URL), or ``None`` (no runtime).
    ``csp_extra`` maps CSP directives to sources the pages must allow in
    addition to ``'self'`` (the worker compiles WebAssembly).  ``fetched_bytes``: what the
    worker's fetches receive (the progress bar's total); ``download_bytes``: everything it
    loads, compressed (the size the page quotes).  ``snapshot``: :func:`snapshot_config`
    (both modes: the files and hashes are the same).
    """
    out_dir = Path(out_dir)
    if mode == "none":
        return {"mode": mode, "pyodide_base": None, "csp_extra": {}}
    wasm = ["'wasm-unsafe-eval'"]
    sizes = {"fetched_bytes": sum(FILE_BYTES[n][0] for n in FETCHED),
             "download_bytes": sum(gz for _, gz in FILE_BYTES.values()), "snapshot": snapshot_config()}
    if mode == "cdn":
        origin = "https://cdn.jsdelivr.net"
        return {"mode": mode, "pyodide_base": CDN_BASE,
                "csp_extra": {"script-src": wasm + [origin], "connect-src": [origin]}, **sizes}
    if mode != "local":
        raise ValueError(f"unknown runtime mode {mode!r}; use local, cdn or none")
    cache = cache_dir()
    hashes = verify_cache(cache)
    dest = out_dir / "pyodide"
    dest.mkdir(parents=True, exist_ok=True)
    for name, digest in sorted(hashes.items()):
        shutil.copyfile(cache / name, dest / name)
        check_file(dest / name, digest)  # the copy, too: nothing unverified reaches site/
    return {"mode": mode, "pyodide_base": "pyodide/", "csp_extra": {"script-src": wasm}, **sizes}
