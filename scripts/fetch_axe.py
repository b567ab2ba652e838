#!/usr/bin/env python3
"""Fill the axe-core cache used by the accessibility tests (outside the work tree), sha512-verified.

    python3 scripts/fetch_axe.py     # cache: $TP_AXE_CACHE or ~/.cache/tp-explained/axe-core-4.14.1/

Source: the npm registry only (``npm pack axe-core@4.14.1``).  The tarball's sha512 must equal
the registry's ``dist.integrity`` pinned below (``npm view axe-core@4.14.1 dist.integrity``);
the tarball stays in the cache and ``axe.min.js`` is re-checked against it on every call, so a
changed file in the cache is noticed.  Idempotent: nothing is downloaded when the cache is good.
Errors are one line on stderr, exit status 1.
"""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

AXE_VERSION = "4.14.1"
# npm view axe-core@4.14.1 dist.integrity
AXE_INTEGRITY = "sha512-FHfa+lmNjQZfJz1q8wKqIDwC6DExcHt/pkjNQb09a3NPjCKg2rhu5qb2S4r76ASyFNNtuFooJpZe37OgudVGtQ=="
TARBALL = f"axe-core-{AXE_VERSION}.tgz"
MEMBER = "package/axe.min.js"


class FetchError(RuntimeError):
    """A one-line, user-facing failure."""


def cache_dir() -> Path:
    env = os.environ.get("TP_AXE_CACHE")
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "tp-explained" / f"axe-core-{AXE_VERSION}"


def integrity(data: bytes) -> str:
    """npm's Subresource-Integrity form of a tarball: sha512-<base64>."""
    return "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()


def _member(tgz: Path) -> bytes:
    with tarfile.open(tgz, "r:gz") as tar:
        fh = tar.extractfile(MEMBER)
        if fh is None:
            raise FetchError(f"{tgz.name} has no {MEMBER}")
        return fh.read()


def cached(cache: Path) -> Path | None:
    """axe.min.js when the cached tarball has the pinned integrity and the file equals its copy."""
    tgz, js = cache / TARBALL, cache / "axe.min.js"
    if not (tgz.is_file() and js.is_file()):
        return None
    if integrity(tgz.read_bytes()) != AXE_INTEGRITY or js.read_bytes() != _member(tgz):
        return None
    return js


def fetch(cache: Path) -> Path:
    """``npm pack axe-core@VERSION`` into a temporary folder, verify, then move into the cache."""
    with tempfile.TemporaryDirectory() as tmp:
        try:
            proc = subprocess.run(["npm", "pack", f"axe-core@{AXE_VERSION}", "--silent"], cwd=tmp,
                                  capture_output=True, text=True, timeout=300)
        except FileNotFoundError:
            raise FetchError("npm not found; install Node.js/npm (apt-get install npm)") from None
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise FetchError(f"npm pack axe-core@{AXE_VERSION} failed: {last}")
        tgz = Path(tmp) / TARBALL
        if not tgz.is_file():
            raise FetchError(f"npm pack did not produce {TARBALL}")
        data = tgz.read_bytes()
        got = integrity(data)
        if got != AXE_INTEGRITY:
            raise FetchError(f"{TARBALL} integrity {got} differs from the registry's {AXE_INTEGRITY}")
        js = _member(tgz)
        cache.mkdir(parents=True, exist_ok=True)
        (cache / TARBALL).write_bytes(data)
        (cache / "axe.min.js").write_bytes(js)
    return cache / "axe.min.js"


def ensure(cache: Path | None = None) -> Path:
    """The verified axe.min.js, fetched first if the cache is missing or wrong."""
    cache = cache or cache_dir()
    return cached(cache) or fetch(cache)


def main() -> int:
    try:
        path = ensure()
    except (FetchError, OSError, tarfile.TarError, subprocess.TimeoutExpired) as err:
        print(f"fetch_axe: {err}", file=sys.stderr)
        return 1
    print(f"fetch_axe: {path} (axe-core {AXE_VERSION}, {AXE_INTEGRITY[:19]}… verified)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
