"""Sentences live in content/i18n, never in the code; Python finds its messages wherever it runs.

* every message key the code can raise or return exists (and, by the build's check, in every
  language with the same placeholders);
* the code never special-cases a language;
* the command lines print English by default and the language of ``--lang``;
* the messages reach the command line from a source checkout, an editable install and both
  wheels the build writes (the browser's and the readers' download).
"""

import ast
import json
import os
import re
import shutil
import site
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

from tpmath import TPMathError, comm_cost, dp_tp, i18n
from tpmath.errors import name as field_name
from tpmath.validate import as_float
from tpmath.ranks.mismatch import HANG_CODES

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
CJK = re.compile(r"[\u4e00-\u9fff]")


def python_files():
    return sorted(p for p in (SRC / "tpmath").rglob("*.py") if "__pycache__" not in p.parts)


def calls(name_of):
    """(file, call node) of every call whose function name is in ``name_of``."""
    for path in python_files():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                f = node.func
                fn = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
                if fn in name_of:
                    yield path, node


def test_every_error_code_and_cell_key_has_a_message():
    strings = i18n.strings("en")
    missing = []
    for path, node in calls({"TPMathError", "_err", "Text"}):
        if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            fn = node.func.id if isinstance(node.func, ast.Name) else node.func.attr
            key = node.args[0].value if fn == "Text" else f"error.{node.args[0].value}"
            if key not in strings:
                missing.append((path.name, node.lineno, key))
    # keys built from a name: every name they can take
    built = ([f"dp_tp.{v}" for v in dp_tp.VARIANTS]
             + [f"comm.where_{w}" for _, w, _, _ in comm_cost.TP_COLLECTIVES + comm_cost.SP_COLLECTIVES]
             + [f"error.split_{w}" for w in ("row", "column", "hidden", "ffn")]
             + ["error.blocks_uneven_elements", "error.blocks_uneven_rows"]
             + [f"real.hang_code.{c}" for c in HANG_CODES])
    # the codes named there are every code the checker gives a hang
    given = {node.args[3].value for path, node in calls({"_hang"}) if path.name == "mismatch.py"
             and isinstance(node.args[3], ast.Constant)}
    assert given and given <= set(HANG_CODES), given - set(HANG_CODES)
    missing += [("built", 0, k) for k in built if k not in strings]
    assert missing == []


def test_every_input_has_a_name_for_messages():
    """Validation names the input by ``name.<field>``: every field the code validates has one."""
    strings = i18n.strings("en")
    fields = set()
    for _, node in calls({"as_int", "as_float", "as_array", "as_choice", "as_dtype", "parse_json", "check_shape",
                          "field_name", "_err"}):
        if node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str):
            fields.add(node.args[0].value)
    fields -= {code for code in fields if f"error.{code}" in strings}    # _err(code, …) in mismatch.py
    assert fields and sorted(f for f in fields if f"name.{f}" not in strings) == []


def test_no_language_is_special_cased_in_the_code():
    problems = []
    for path in python_files() + sorted((SRC / "tpsite").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        for n, line in enumerate(text.splitlines(), 1):
            if re.search(r"""lang\s*[!=]=\s*["']""", line) or re.search(r"""["'][\w]*_(en|zh)["']""", line) \
                    or re.search(r"\b\w+_(en|zh)\s*=", line) or CJK.search(line):
                problems.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()}")
    assert problems == []


def test_error_is_a_cell_the_page_translates():
    with pytest.raises(TPMathError) as info:
        as_float("shift", "1e5", -1e4, 1e4)
    err = info.value
    assert err.field == "shift" and err.code == "range"
    assert err.cell == {"key": "error.range", "args": {"name": {"key": "name.shift"}, "value": "1e5",
                                                       "lo": "\u221210\u202f000", "hi": "10\u202f000"}}
    # issue 12 item 18: written for readers, in each language
    assert str(err) == "Shift must be between \u221210\u202f000 and 10\u202f000, not 1e5"
    assert err.message("zh") == "平移量：须在 \u221210\u202f000 到 10\u202f000 之间，当前为 1e5"
    assert i18n.text(field_name("shift"), "zh") == "平移量"


def test_placeholders_are_filled_like_the_page_does():
    """Only {word} is replaced (as app.js's regex); nested cells are translated; unknown args stay."""
    cell = i18n.Text("error.usage", detail=i18n.Text("name.shift"), prog="p {x}")
    assert i18n.text(cell, "en") == "Shift (see p {x} --help)"


def cli(*args, module="tpmath", cwd=None, env=None):
    env = env or {**os.environ, "PYTHONPATH": str(SRC)}
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env=env)


def one_error(out):
    lines = out.stderr.strip().splitlines()
    assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    return lines[0]


def test_cli_prints_english_by_default_and_the_language_of_lang():
    assert one_error(cli("vocab-ce", "--shift", "1e5")) == \
        "error: Shift must be between \u221210\u202f000 and 10\u202f000, not 1e5"
    zh = one_error(cli("vocab-ce", "--shift", "1e5", "--lang", "zh"))
    assert zh == "error: 平移量：须在 \u221210\u202f000 到 10\u202f000 之间，当前为 1e5"
    assert one_error(cli("--lang=zh", "mlp", "--tp", "3")).startswith("error: tp=3 不能整除 d_ff=4")
    assert one_error(cli("mlp", "--lang", "fr")) == \
        "error: There are no messages in the language fr; available: en, zh"
    # sentences inside results follow --lang too
    out = cli("mismatch", "--scenario", "early_exit", "--json", "--lang", "zh")
    assert "提前退出" in json.loads(out.stdout)["hangs"][0]["message"]


def test_real_runner_takes_lang_too():
    """Without torchrun the runner says how to start it, in the language asked for."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")} | {"PYTHONPATH": str(SRC)}
    line = one_error(cli("vocab-ce", "--shards", "3", "--lang", "zh", module="tpmath.real", env=env))
    assert CJK.search(line) and "--lang zh" in line, line


# ---------------------------------------------------------------- where the messages are found

def isolated_env(path_entry: Path) -> dict:
    """Python that sees ``path_entry`` and numpy, but neither this checkout nor /work/main."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONUSERBASE")}
    env["PYTHONPATH"] = str(path_entry)
    env["PYTHONNOUSERSITE"] = "1"
    return env


CHECK = ("import tpmath, tpmath.i18n as i; from tpmath.mlp import run_mlp\n"
         "try: run_mlp(tp=3)\n"
         "except tpmath.TPMathError as e: print(i.catalog_dir()); print(e); print(e.message('zh'))\n")


def check_messages(env, cwd, inside: Path):
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True,
                         text=True, timeout=60, env=env, cwd=cwd)
    assert out.returncode == 0, out.stderr
    where, en, zh = out.stdout.splitlines()
    assert Path(where).resolve().is_relative_to(inside.resolve()), where
    assert en == "tp=3 does not divide d_ff=4: every rank needs an equal shard"
    assert zh.startswith("tp=3 不能整除 d_ff=4")


@pytest.fixture(scope="module")
def wheels(tmp_path_factory):
    from tpsite.wheel import build_wheel
    out = tmp_path_factory.mktemp("wheels")
    return {"browser": out / build_wheel(out), "readers": out / build_wheel(out, full=True)}


@pytest.mark.parametrize("kind", ["browser", "readers"])
def test_messages_travel_in_both_wheels(wheels, tmp_path, kind):
    target = tmp_path / "site-packages"
    with zipfile.ZipFile(wheels[kind]) as zf:
        names = zf.namelist()
        zf.extractall(target)
    assert sorted(n for n in names if n.startswith("tpmath/i18n/")) == sorted(
        f"tpmath/i18n/{p.name}" for part in i18n.PARTS for p in (ROOT / "content" / "i18n").glob(f"*.{part}.toml"))
    env = isolated_env(target)
    check_messages(env, tmp_path, target)
    if kind == "readers":       # the command lines are in the readers' wheel only
        assert one_error(cli("mlp", "--tp", "3", "--lang", "zh", cwd=tmp_path, env=env)).startswith(
            "error: tp=3 不能整除")
        assert "Start it with torchrun" in one_error(cli("mlp", module="tpmath.real", cwd=tmp_path, env=env))


def test_messages_from_a_source_checkout(tmp_path):
    check_messages(isolated_env(SRC), tmp_path, ROOT / "content" / "i18n")


def test_messages_from_an_editable_install(tmp_path):
    """pip install -e of a copy of the project into a private prefix (nothing else changes; --user
    is refused inside a virtual environment, which the README's commands allow)."""
    project = tmp_path / "project"
    for part in ("src", "content"):
        shutil.copytree(ROOT / part, project / part, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copyfile(ROOT / name, project / name)
    prefix = tmp_path / "prefix"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    pip = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--prefix", str(prefix), "--ignore-installed", "--no-deps",
                          "--no-build-isolation", "--no-index", "-e", str(project)], capture_output=True, text=True,
                         timeout=300, env=env, cwd=tmp_path)
    assert pip.returncode == 0, pip.stderr
    site_dir = sysconfig.get_path("purelib", vars={"base": str(prefix), "platbase": str(prefix)})
    # The prefix is not a site directory of this interpreter: add it the way site.py adds one (.pth
    # files), before this interpreter's own site directories (python -S, then both by hand), so the
    # copy is found first even where this checkout is installed too (as .ci/run installs it).
    # --ignore-installed above keeps pip from uninstalling that installation on the way.
    own_sites = site.getsitepackages()
    boot = (f"import site, sys, runpy; site.addsitedir({site_dir!r}); "
            f"[site.addsitedir(d) for d in {own_sites!r}]; ")

    def python(code: str, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-S", "-c", boot + code, *args], capture_output=True, text=True,
                              timeout=60, env=env, cwd=tmp_path)

    out = python("sys.argv[0] = 'tpmath'; runpy.run_module('tpmath', run_name='__main__')",
                 "mlp", "--tp", "3", "--lang", "zh")
    assert one_error(out).startswith("error: tp=3 不能整除")
    where = python("import tpmath.i18n as i; print(i.catalog_dir()); print(i.__file__)").stdout.split()
    assert Path(where[0]).resolve() == (project / "content" / "i18n").resolve()
    assert Path(where[1]).resolve().is_relative_to(project.resolve())    # the copy, not this checkout


def test_message_files_parse_and_match_the_build_rule():
    for path in sorted((ROOT / "content" / "i18n").glob("*.toml")):
        tomllib.loads(path.read_text(encoding="utf-8"))
    assert set(i18n.languages()) == {p.name for p in (ROOT / "content").iterdir()
                                     if p.is_dir() and p.name not in ("i18n", "demos")}


def test_a_latin_term_and_its_full_width_gloss_are_joined_in_headers_and_captions():
    """Issue 25 item 4: Chromium may break before a full-width bracket, so «rank（卡）» or
    «P（每行…）» could lose its gloss to the next line of a table header or caption; the strings of
    the col, cap and label tables (row headers are labels) join the two with a word joiner
    (U+2060), as the build does in the h1."""
    import re
    from tpsite.content import load_strings
    loose = re.compile(r"[A-Za-z0-9_)\]}][（【「《]")
    checked = 0
    for lang in ("en", "zh"):
        strings = load_strings(ROOT / "content" / "i18n", lang)[0]
        for key, text in strings.items():
            if key.startswith(("col.", "cap.", "label.")):     # headers, captions, row headers
                checked += 1
                assert not loose.search(text), (lang, key, text)
    assert checked > 200
