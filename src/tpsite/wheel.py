"""Pack ``src/tpmath`` into a deterministic pure-Python wheel for Pyodide.

The browser needs the core and the view functions (numpy + stdlib only).  A
standard ``py3-none-any`` wheel is what Pyodide installs; building it by hand
(rather than through setuptools) keeps it byte-identical across builds: sorted
entries, a fixed timestamp, fixed permissions, fixed compression level, and a
RECORD with the sha256 of every file.
"""

from __future__ import annotations

import ast
import base64
import hashlib
import re
import zipfile
from pathlib import Path

import tpmath
from tpmath import i18n

# 1980-01-01, the earliest date a zip entry can carry (like SOURCE_DATE_EPOCH=315532800).
FIXED_TIME = (1980, 1, 1, 0, 0, 0)
# Modules the browser part must never import (the builder's dependencies, and torch).
FORBIDDEN_IMPORTS = ("jinja2", "markdown", "latex2mathml", "pygments", "tpsite", "torch")
# Left out of the browser's wheel (nothing the page runs imports them; check_imports makes
# sure): tpmath.real (real ranks, torch) and the command line (tpmath.cli, tpmath/__main__.py).
# The readers' download (full=True) has everything.
EXCLUDED_PACKAGES = ("real", "cli", "__main__.py")
REAL_TORCH = "2.13"          # the extra's lower bound (the version the real-rank tests ran with)
DOWNLOAD_DIR = "download"    # the readers' wheel: site/download/tpmath-<version>-py3-none-any.whl
CONTENT_I18N = Path(__file__).resolve().parents[2] / "content" / "i18n"   # this checkout's strings


class WheelError(RuntimeError):
    """The package cannot be packed (e.g. it imports a builder-only module)."""


def package_dir() -> Path:
    """The ``tpmath`` source directory."""
    return Path(tpmath.__file__).resolve().parent


def package_files(root: Path, full: bool = False) -> list[Path]:
    """Every ``.py`` file and ``py.typed`` under ``root``, sorted, caches skipped, and
    :data:`EXCLUDED_PACKAGES` too unless ``full``."""
    files = [p for p in root.rglob("*")
             if p.is_file() and "__pycache__" not in p.parts and (p.suffix == ".py" or p.name == "py.typed")
             and (full or p.relative_to(root).parts[0] not in EXCLUDED_PACKAGES)]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def check_imports(path: Path, text: str) -> None:
    """Refuse a module that imports a builder-only package or a part of tpmath left out of the
    browser's wheel (it would fail in Pyodide)."""
    for mod in FORBIDDEN_IMPORTS:
        if re.search(rf"^\s*(import|from)\s+{mod}\b", text, re.MULTILINE):
            raise WheelError(f"{path} imports {mod}, which the browser runtime does not have")
    left_out = {name.removesuffix(".py") for name in EXCLUDED_PACKAGES}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            targets = [a.name.removeprefix("tpmath.").split(".")[0] for a in node.names if a.name.startswith("tpmath.")]
        elif isinstance(node, ast.ImportFrom):
            module = (node.module or "").removeprefix("tpmath.") if node.level or (node.module or "").startswith(
                "tpmath") else None
            if module is None:
                continue
            targets = [module.split(".")[0]] if module and module != "tpmath" else [a.name for a in node.names]
        else:
            continue
        bad = [t for t in targets if t in left_out]
        if bad:
            raise WheelError(f"{path} (line {node.lineno}) imports tpmath.{bad[0]}, which the browser's wheel "
                             "leaves out")


def slim_source(text: str) -> bytes:
    """The module as the browser gets it: same code, no comments, docstrings cut.

    Module docstrings keep their first line (``cli`` prints it); function and class
    docstrings are dropped, and so are function annotations.  An AST round trip, so the code
    itself is unchanged; the wheel
    (a download on every page) gets ~40 % smaller.  The readable source is src/tpmath/.
    """
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            # Parameter and return annotations: nothing in tpmath reads them at run time;
            # class-level ones stay (dataclass fields need them).
            node.returns = None
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]:
                if arg is not None:
                    arg.annotation = None
        body = getattr(node, "body", None)
        if not (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                and body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            continue
        if isinstance(node, ast.Module):
            body[0].value.value = body[0].value.value.strip().split("\n")[0]
        else:
            del body[0]
            if not body:
                body.append(ast.Pass())
    return (ast.unparse(tree) + "\n").encode("utf-8")


def _record_hash(data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"sha256={digest}"


def message_files(i18n_dir: Path) -> list[Path]:
    """The string files tpmath prints from (:data:`tpmath.i18n.PARTS`), every language, sorted."""
    return sorted(p for part in i18n.PARTS for p in Path(i18n_dir).glob(f"*.{part}.toml"))


def wheel_entries(version: str, i18n_dir: Path, full: bool = False) -> list[tuple[str, bytes]]:
    """``(archive name, bytes)`` of every file of the wheel, RECORD last.

    The browser's wheel (default) has the slimmed core and views only; ``full`` is the
    readers' download: readable sources, ``tpmath.real`` included, and the ``real`` extra
    (torch) declared, so ``pip install "./tpmath-…whl[real]"`` gives everything.  Both carry
    the message files of ``i18n_dir`` in ``tpmath/i18n/`` (where :mod:`tpmath.i18n` looks first):
    the command lines print them, and ``str(error)`` in any Python that imports tpmath.
    """
    root = package_dir()
    entries = []
    for path in package_files(root, full=full):
        data = path.read_bytes()
        if path.suffix == ".py" and not full:
            check_imports(path, data.decode("utf-8"))
            data = slim_source(data.decode("utf-8"))
        entries.append((f"tpmath/{path.relative_to(root).as_posix()}", data))
    entries += [(f"tpmath/i18n/{p.name}", p.read_bytes()) for p in message_files(i18n_dir)]
    entries.sort()
    dist = f"tpmath-{version}.dist-info"
    metadata = (f"Metadata-Version: 2.1\nName: tpmath\nVersion: {version}\n"
                "Summary: Tensor parallelism explained: the numpy core and view functions\n"
                "Requires-Python: >=3.11\nRequires-Dist: numpy>=2.0\n")
    if full:
        metadata += f"Provides-Extra: real\nRequires-Dist: torch>={REAL_TORCH}; extra == \"real\"\n"
    wheel = ("Wheel-Version: 1.0\nGenerator: tpsite.wheel\nRoot-Is-Purelib: true\n"
             "Tag: py3-none-any\n")
    entries += [(f"{dist}/METADATA", metadata.encode()), (f"{dist}/WHEEL", wheel.encode()),
                (f"{dist}/top_level.txt", b"tpmath\n")]
    record = "".join(f"{name},{_record_hash(data)},{len(data)}\n" for name, data in entries)
    record += f"{dist}/RECORD,,\n"
    entries.append((f"{dist}/RECORD", record.encode()))
    return entries


def download_path() -> str:
    """Where the readers' wheel lives, relative to the site root."""
    return f"{DOWNLOAD_DIR}/tpmath-{tpmath.__version__}-py3-none-any.whl"


def build_wheel(out_dir: Path, i18n_dir: Path = CONTENT_I18N, full: bool = False) -> str:
    """Write ``static/tpmath-<version>-py3-none-any.whl`` under ``out_dir`` (``site/``), or
    with ``full`` the readers' wheel at :func:`download_path`; messages from ``i18n_dir``.

    Returns the wheel's path relative to ``out_dir`` (POSIX separators).
    """
    version = tpmath.__version__
    rel = download_path() if full else f"static/tpmath-{version}-py3-none-any.whl"
    target = Path(out_dir) / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(target, "w") as zf:
        for name, data in wheel_entries(version, i18n_dir, full=full):
            info = zipfile.ZipInfo(name, date_time=FIXED_TIME)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            info.create_system = 3  # Unix, whatever the build machine
            zf.writestr(info, data, compresslevel=9)
    return rel
