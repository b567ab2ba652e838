"""The site's examples on real processes: ``torchrun -m tpmath.real`` vs the simulated core.

Every run is torchrun (``python -m torch.distributed.run``, which is what the ``torchrun``
script runs) with 2 or 4 gloo processes on 127.0.0.1, in its own process group with a hard
deadline (killed, and the test failed, if it does not finish).  A launch costs more than the
examples (a torch import per process), so a file's cases of one world size run in one launch
(:func:`together`, tests/real_many.py: the command's own steps, one case after the other);
the page's commands (the first of each example), the wheel, the mismatches and the errors are
launched as a reader types them.  Each rank's printed lines must equal, character for
character, what :func:`tpmath.ranks.expected` computes with the numpy core and the same
formatting; rank 0's comparison with the unsharded computation (done in torch, in one process)
must pass.  Low-precision runs and random shapes are compared numerically from ``--json``
output.

The mismatch scenarios run with a 3 s collective timeout: the test asserts that the run
ends, that every call the checker says completes did complete with the right data, and that
no call the checker says never completes was reported as a correct completion.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")

from tpmath import collectives, i18n, mismatch, ranks  # noqa: E402
from check_lines import assert_same_check  # noqa: E402
from conftest import locked  # noqa: E402
from real_many import MARK  # noqa: E402

pytestmark = pytest.mark.torch

ROOT = Path(__file__).resolve().parents[1]
WORLD_SIZES = (2, 4)
DEADLINE_S = 120


def _torchrun(n: int, target: list[str], deadline: float) -> tuple[subprocess.CompletedProcess, bool]:
    """``torchrun --standalone --nproc-per-node n *target`` with this checkout's code; (the run,
    whether it was killed at the deadline)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n), *target]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            cwd=ROOT, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=deadline)
        killed = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)      # torchrun and every rank it started
        out, err = proc.communicate()
        killed = True
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err), killed


def launch(n: int, argv: list[str], deadline: float = DEADLINE_S) -> subprocess.CompletedProcess:
    """``torchrun --standalone --nproc-per-node n -m tpmath.real *argv`` with this checkout's code."""
    run, killed = _torchrun(n, ["-m", "tpmath.real", *argv], deadline)
    if killed:
        pytest.fail(f"{' '.join(argv)} on {n} ranks did not finish in {deadline} s\n{run.stdout}\n{run.stderr[-2000:]}")
    return run


def launch_many(n: int, argvs: list[list[str]]) -> list[subprocess.CompletedProcess]:
    """Every ``launch(n, argv)`` of ``argvs`` from one launch (tests/real_many.py): each stdout is
    that case's lines; the status and stderr are the launch's.  A launch killed at its deadline
    or a rank that died leaves a failed status and says so in stderr (the cases' tests fail)."""
    deadline = DEADLINE_S + 10 * len(argvs)
    with tempfile.TemporaryDirectory() as tmp:
        cases = Path(tmp) / "cases.json"
        cases.write_text(json.dumps(argvs), encoding="utf-8")
        run, killed = _torchrun(n, [str(ROOT / "tests" / "real_many.py"), str(cases)], deadline)
    parts: dict[str, list[str]] = {}
    for line in run.stdout.splitlines(keepends=True):
        if line.startswith(MARK):
            parts[line.split()[-1]] = []
        elif parts:
            parts[list(parts)[-1]].append(line)
    code, err = run.returncode, run.stderr
    if killed or "end" not in parts:
        code = code or 1
        err = f"{len(argvs)} cases on {n} ranks: killed at {deadline} s: {killed}; last case started: " \
              f"{list(parts)[-1:]}\n{err}"
    return [subprocess.CompletedProcess([*run.args, *argv], code, "".join(parts.get(str(i), [])), err)
            for i, argv in enumerate(argvs)]


_TOGETHER: dict[str, list] = {}


def together(run_dir: Path, n: int, argvs: list[list[str]], argv: list[str]) -> subprocess.CompletedProcess:
    """``argv``'s run from one launch of all ``argvs`` on n ranks (:func:`launch_many`), made the
    first time one of them is asked for, by the first pytest-xdist worker that asks (the others
    read what it left in the run's shared directory)."""
    key = hashlib.sha256(json.dumps([n, argvs]).encode()).hexdigest()[:16]
    if key not in _TOGETHER:
        path = run_dir / f"real-many-{key}.json"
        with locked(path.with_suffix(".lock")):
            if not path.is_file():
                runs = [[r.args, r.returncode, r.stdout, r.stderr] for r in launch_many(n, argvs)]
                path.write_text(json.dumps(runs), encoding="utf-8")
        _TOGETHER[key] = json.loads(path.read_text(encoding="utf-8"))
    return subprocess.CompletedProcess(*_TOGETHER[key][argvs.index(argv)])


def rank_lines(stdout: str, n: int, lang: str = "en") -> tuple[list[list[str]], list[str]]:
    """Each rank's ``[rank r]`` lines (check block of rank 0 separated out)."""
    per = [[] for _ in range(n)]
    check: list[str] = []
    in_check = False
    for line in stdout.splitlines():
        if not line.startswith("[rank "):
            continue
        r = int(line[6:line.index("]")])
        if r == 0 and line == ranks.check_title(lang):
            in_check = True
        (check if in_check and r == 0 else per[r]).append(line)
    return per, check


def assert_same_as_core(n: int, example: str, given: dict, run: subprocess.CompletedProcess,
                        lang: str = "en") -> None:
    """Real run's printed lines == the core's expected lines, rank by rank; the check passes."""
    p = ranks.plan(example, given)
    assert p["world"] == n
    want_ranks, want_check = ranks.expected(p)
    assert run.returncode == 0, run.stderr[-3000:]
    got_ranks, got_check = rank_lines(run.stdout, n, lang)
    for r in range(n):
        assert got_ranks[r] == ranks.format_rank(r, want_ranks[r], lang=lang), f"rank {r}\n{run.stdout}"
    assert_same_check(got_check, ranks.format_check(want_check, lang))   # measured digits are the run's own
    assert all(line.endswith(ranks.OK) for line in got_check[1:]), got_check


def _argv(example: str, given: dict) -> list[str]:
    args = [example]
    for key, value in given.items():
        args += [f"--{key.replace('_', '-')}", str(value)]
    return args


def text_cases():
    for n in WORLD_SIZES:
        yield n, "mlp", {"tp": n}
        yield n, "mlp", {"tp": n, "stage": "partial"}
        yield n, "row-linear", {"tp": n}
        yield n, "row-linear", {"tp": n, "bias": "[0.5,-1,2,0.25]", "seed": 7, "batch": 3}
        yield n, "column-linear", {"tp": n}
        yield n, "column-linear", {"tp": n, "bias": "[1,2,3,4]", "d_in": 3, "stage": "backward"}
        for i, name in enumerate(collectives.NAMES):
            op = collectives.OPS[i % len(collectives.OPS)]
            yield n, "collective", {"name": name, "ranks": n, "op": op, "root": n - 1}
        yield n, "vocab-ce", {"shards": n}
        yield n, "vocab-ce", {"shards": n, "target": 4, "shift": -3.5}
        yield n, "vocab-ce", {"shards": n, "label_smoothing": 0.1, "target": 0}


LANG_CASES = [(4, "vocab-ce", {"shards": 4}), (2, "collective", {"name": "scatter", "ranks": 2, "root": 1})]


def _zh(example: str, given: dict) -> list[str]:
    return _argv(example, given) + ["--lang", "zh"]


def _cases_on(n: int) -> list[list[str]]:
    """This file's runs on n ranks, made in one launch (:func:`together`)."""
    return ([_argv(ex, g) for m, ex, g in text_cases() if m == n]
            + [_zh(ex, g) for m, ex, g in LANG_CASES if m == n]
            + [_argv(ex, g) + ["--json"] for m, ex, g, _ in NUMERIC_CASES if m == n])


@pytest.mark.parametrize("n, example, given", [
    pytest.param(n, ex, g, id=f"n{n}-{ex}-" + "-".join(f"{k}={v}" for k, v in g.items()))
    for n, ex, g in text_cases()])
def test_every_rank_prints_what_the_core_computes(n, example, given, run_dir):
    argv = _argv(example, given)
    assert_same_as_core(n, example, given, together(run_dir, n, _cases_on(n), argv))


@pytest.mark.parametrize("n, example, given", LANG_CASES)
def test_every_rank_prints_in_the_language_asked_for(n, example, given, run_dir):
    """``--lang zh``: the same records in Chinese, as the Chinese page shows them."""
    argv = _zh(example, given)
    assert_same_as_core(n, example, given, together(run_dir, n, _cases_on(n), argv), "zh")


# ------------------------------------------------------------------------ numeric (--json)

def json_ranks(stdout: str, n: int) -> list[dict]:
    rows = [json.loads(line) for line in stdout.splitlines() if line.startswith('{"rank"')]
    assert sorted(r["rank"] for r in rows) == list(range(n)), stdout
    return sorted(rows, key=lambda r: r["rank"])


NONFINITE = {"inf": np.inf, "-inf": -np.inf, "nan": np.nan}


def _num(v):
    """A JSON record value: text stays text; numbers (±inf written as strings) become arrays."""
    if isinstance(v, str) and v not in NONFINITE:
        return v
    return np.asarray(_inf(v), dtype=np.float64)


def _inf(v):
    if isinstance(v, list):
        return [_inf(x) for x in v]
    return NONFINITE.get(v, v) if isinstance(v, str) else v


NUMERIC_CASES = [
    # (n, example, options, relative tolerance of each printed value vs the core)
    (2, "mlp", {"tp": 2, "seed": 3, "batch": 3, "d_model": 5, "d_ff": 8}, 1e-12),
    (4, "mlp", {"tp": 4, "seed": 11, "batch": 2, "d_model": 3, "d_ff": 12}, 1e-12),
    (2, "mlp", {"tp": 2, "dtype": "float32"}, 1e-5),
    (4, "mlp", {"tp": 4, "dtype": "float16"}, 4e-3),
    (4, "vocab-ce", {"shards": 4, "logits": "[[1.2,-0.5,2,0.1,1.4,-1],[0,3,-2,1,0.5,0.25],[2,2,2,2,2,2]]",
                     "target": "[2,-100,5]", "label_smoothing": 0.2}, 1e-12),
    (2, "vocab-ce", {"shards": 2, "dtype": "float32", "shift": 1000}, 1e-5),
    (4, "vocab-ce", {"shards": 4, "dtype": "float16", "label_smoothing": 0.1}, 4e-3),
    (2, "row-linear", {"tp": 2, "x": "[[1e3,-2],[3,4]]", "a": "[[1,2,3],[4,5,6]]", "dy": "[[1,0,-1],[2,1,0]]"},
     1e-12),
]


@pytest.mark.parametrize("n, example, given, rtol", [
    pytest.param(*c, id=f"n{c[0]}-{c[1]}-" + "-".join(f"{k}={v}" for k, v in c[2].items())[:60])
    for c in NUMERIC_CASES])
def test_json_values_match_the_core(n, example, given, rtol, run_dir):
    p = ranks.plan(example, given)
    want_ranks, want_check = ranks.expected(p)
    run = together(run_dir, n, _cases_on(n), _argv(example, given) + ["--json"])
    assert run.returncode == 0, run.stderr[-3000:]
    got = json_ranks(run.stdout, n)
    for r in range(n):
        names = [name for name, _ in got[r]["records"]]
        assert names == [i18n.text(name) for name, _ in want_ranks[r]], f"rank {r}"   # cells in English
        for (name, value), (_, want) in zip(got[r]["records"], want_ranks[r]):
            value = _num(value)
            if isinstance(want, (str, dict)):                 # a text or a cell
                assert value == i18n.text(want), (r, name)
                continue
            want = np.asarray(want, dtype=np.float64)
            scale = max(1.0, float(np.max(np.abs(want[np.isfinite(want)]), initial=0.0)))
            assert value.shape == want.shape, (r, name)
            assert np.array_equal(np.isinf(value), np.isinf(want)), (r, name)
            fin = np.isfinite(want)
            np.testing.assert_allclose(value[fin], want[fin], rtol=0, atol=rtol * scale, err_msg=f"rank {r} {name}")
    assert [name for name, _ in got[0]["check"]] == [i18n.text(name) for name, _ in want_check]
    assert all(v.endswith(ranks.OK) for _, v in got[0]["check"]), got[0]["check"]


# ------------------------------------------------------------------------------ mismatch

@pytest.mark.parametrize("scenario", list(mismatch.SCENARIOS))
def test_mismatch_is_reported_not_left_hanging(scenario):
    p = ranks.plan("mismatch", {"scenario": scenario, "timeout": 3})
    n = p["world"]
    run = launch(n, ["mismatch", "--scenario", scenario, "--timeout", "3"], deadline=90)
    per, _ = rank_lines(run.stdout, n)
    want, _ = ranks.expected(p)
    hangs = {h.rank: h.call_index for h in p["core"].hangs}
    for r in range(n):
        checker = [line for line in per[r] if "checker:" in line]
        assert checker == ranks.format_rank(r, want[r]), run.stdout
        real = {int(line.split("#", 1)[1].split()[0]): line.split("real: ", 1)[1]
                for line in per[r] if "real: " in line}
        stuck_at = hangs.get(r)
        for i in range(len(p["calls"][r])):
            if stuck_at is None or i < stuck_at:
                assert real.get(i) == f"completed {ranks.OK}", (r, i, run.stdout, run.stderr[-2000:])
            elif i == stuck_at:
                # gloo may time out, fail, complete with wrong data (each reported on a "real: ✗"
                # line) or abort the rank, which torchrun then reports with its exit code.
                if i in real:
                    assert real[i].startswith(ranks.BAD), (r, i, run.stdout)
                else:
                    assert re.search(rf"rank\s*:\s*{r} \(local_rank: {r}\)\s*\n\s*exitcode\s*:\s*-?\d+",
                                     run.stderr), (r, i, run.stdout, run.stderr[-3000:])
            else:
                assert i not in real, (r, i, run.stdout)
    if not hangs:
        assert run.returncode == 0, run.stderr[-2000:]


# ------------------------------------------------------------------------------- errors

def _plain_run(argv: list[str], extra_env: dict | None = None, python_args: list[str] | None = None):
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK"):
        env.pop(key, None)
    env.update(extra_env or {})
    return subprocess.run([sys.executable, *(python_args or ["-m", "tpmath.real"]), *argv],
                          capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)


def _one_error_line(run) -> str:
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert run.returncode == 2, run.stderr
    assert len(lines) == 1 and lines[0].startswith("error: "), run.stderr
    assert "Traceback" not in run.stderr
    return lines[0]


def test_without_torchrun_prints_the_command_to_use():
    line = _one_error_line(_plain_run(["mlp", "--tp", "4", "--stage", "forward"]))
    assert "torchrun --standalone --nproc-per-node 4 -m tpmath.real mlp --tp 4 --stage forward" in line


def test_the_hint_keeps_the_runs_own_flags():
    line = _one_error_line(_plain_run(["collective", "--ranks", "3", "--backend", "gloo", "--json"]))
    assert line.endswith("torchrun --standalone --nproc-per-node 3 -m tpmath.real collective --ranks 3 "
                         "--backend gloo --json"), line


def test_world_size_that_does_not_fit_is_one_clear_error():
    run = launch(2, ["mlp", "--tp", "4"])
    assert run.returncode != 0
    errors = [line for line in run.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, run.stderr          # rank 0 speaks for the group
    assert "needs 4 processes" in errors[0] and "started 2" in errors[0]
    assert "--nproc-per-node 4" in errors[0]


@pytest.mark.parametrize("argv, needle", [
    (["mlp", "--tp", "3"], "tp"),
    (["mlp", "--dtype", "int8"], "dtype"),
    (["vocab-ce", "--shift", "-1e9"], "shift"),
    (["collective", "--name", "all-sum"], "all-sum"),
    (["collective", "--root", "5"], "root"),
    (["mismatch", "--timeout", "0"], "timeout"),
    (["row-linear", "--x", "[[1,2],[3]]"], "ragged"),
    (["nonsense"], "nonsense"),
])
def test_bad_options_are_one_line_before_any_launch(argv, needle):
    line = _one_error_line(_plain_run(argv)).lower()     # names the input ("Shift must be …")
    assert needle in line


def test_missing_torch_is_one_clear_error():
    # A Python whose `import torch` fails, as on a machine without the [real] extra.
    code = ("import sys, runpy; sys.modules['torch'] = None; sys.argv = ['tpmath.real', 'mlp'];"
            "runpy.run_module('tpmath.real', run_name='__main__')")
    line = _one_error_line(_plain_run([], {"RANK": "0", "WORLD_SIZE": "2"}, ["-c", code]))
    assert "pip install torch" in line and "pip install -e '.[real]'" in line


def test_core_and_site_never_import_torch():
    code = ("import sys, tpmath, tpmath.ranks, tpmath.views, tpmath.cli, tpsite.build;"
            "import tpmath.views.mlp, tpmath.views.row_linear, tpmath.views.vocab_ce, tpmath.views.collectives;"
            "print('torch' in sys.modules)")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, PYTHONPATH=str(ROOT / "src")), cwd=ROOT)
    assert run.stdout.strip() == "False", run.stderr


# ------------------------------------------------------------------- from the page, run

def page_blocks(site: Path, lang: str) -> list[tuple[str, str, str, str]]:
    """(page, section, command, output) of every real-ranks block of the built pages."""
    from html_tree import parse
    out = []
    for page in sorted((site / lang).glob("*.html")):
        tree = parse(page.read_text(encoding="utf-8"))
        for block in tree.find_all("details", class_="real-ranks"):
            section = block.attrs["data-real"]
            for code in block.find_all("code", data_real_command=True):
                i = code.attrs["data-real-command"]
                output = block.find("pre", data_real_output=i)
                out.append((page.name, section, code.text(), output.text()))
    return out


def demos_with_an_example() -> set[str]:
    """Sections whose view declares ``real`` and that some page of content/en or content/zh shows
    (``{{demo NAME …}}``, read with the build's own pattern)."""
    from tpmath.views import sections
    from tpsite.markdown_ext import SHORTCODE_RE
    shown = {m.group(2) for lang in ("en", "zh") for page in (ROOT / "content" / lang).glob("*.md")
             for line in page.read_text(encoding="utf-8").splitlines()
             if (m := SHORTCODE_RE.match(line.strip())) and m.group(1) == "demo"}
    return {name for name, sec in sections().items() if sec.real is not None and name in shown}


def test_every_section_with_an_example_has_a_block_in_both_languages(built_site):
    en, zh = page_blocks(built_site, "en"), page_blocks(built_site, "zh")
    want = demos_with_an_example()
    assert want, "no page shows a section with an example: the derivation is broken"
    assert {s for _, s, _, _ in en} == want
    assert {s for _, s, _, _ in zh} == want
    # the same runs in the page's language: the Chinese command adds --lang zh, and prints the
    # same numbers (labels translated: tests/test_ranks_lang.py)
    number = re.compile(r"[−-]?\d+(?:\.\d+)?(?:e[−-]?\d+)?")
    assert [(p, s, c + " --lang zh", number.findall(o)) for p, s, c, o in en] == \
        [(p, s, c, number.findall(o)) for p, s, c, o in zh]


def _page_argv(command: str) -> tuple[int, list[str]]:
    """(ranks, what follows ``-m tpmath.real``) of a block's command."""
    import shlex
    argv = shlex.split(command)
    assert argv[:3] == ["torchrun", "--standalone", "--nproc-per-node"], command
    assert argv[4:6] == ["-m", "tpmath.real"], command
    if argv[6] == "mismatch":
        argv += ["--timeout", "3"]                    # the page's default waits 10 s per call
    return int(argv[3]), argv[6:]


@functools.cache
def _launched_alone(site: Path) -> frozenset[str]:
    """The commands launched exactly as a reader types them: the first English block of each example
    and world size, and every mismatch (its broken group cannot be shared)."""
    first: dict[tuple[str, int], str] = {}
    for lang in ("en", "zh"):
        for _, _, command, _ in page_blocks(site, lang):
            n, argv = _page_argv(command)
            if lang == "en" or argv[0] == "mismatch":
                first.setdefault((lang, argv[0], n), command)
    return frozenset(first.values())


@functools.cache
def _page_cases_on(site: Path, n: int) -> list[list[str]]:
    """The other blocks' runs on n ranks, both languages, made in one launch (:func:`together`)."""
    runs = [_page_argv(command) for lang in ("en", "zh") for _, _, command, _ in page_blocks(site, lang)
            if command not in _launched_alone(site)]
    return [argv for m, argv in runs if m == n and argv[0] != "mismatch"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_command_copied_from_the_page_prints_the_page_output(built_site, run_dir, lang):
    """What a reader does: copy the command, run it, compare with the block, line by line."""
    from tpmath import i18n
    real_said = i18n.text({"key": "real.real_outcome", "args": {"outcome": ""}}, lang)
    alone = _launched_alone(built_site)
    shown = {_page_argv(c)[1][0] for lg in ("en", "zh") for _, _, c, _ in page_blocks(built_site, lg)}
    assert {_page_argv(c)[1][0] for c in alone} == shown, alone     # every example launched as typed
    for page, section, command, output in page_blocks(built_site, lang):
        n, argv = _page_argv(command)
        if command in alone or argv[0] == "mismatch":
            run = launch(n, argv)
        else:
            run = together(run_dir, n, _page_cases_on(built_site, n), argv)
        got = [line for line in run.stdout.splitlines() if line.startswith("[rank ")]
        if argv[0] == "mismatch":                         # the real run adds its "real:" lines
            got = [line for line in got if real_said not in line]
            assert sorted(got) == sorted(output.splitlines()), (page, section, run.stdout)
            continue
        assert run.returncode == 0, (page, section, run.stderr[-2000:])
        # the same lines, but a check line's measured difference is the real run's own (PyTorch adds
        # in another order than numpy); it must agree with its mark
        assert_same_check(got, output.splitlines())


def test_the_readers_wheel_runs_on_real_ranks(built_site, tmp_path):
    """The page's download: metadata declares the [real] extra; unpacked alone (not this
    checkout's src/) it runs an example under torchrun and prints the expected lines."""
    import zipfile
    wheels = list((built_site / "download").glob("tpmath-*-py3-none-any.whl"))
    assert len(wheels) == 1
    with zipfile.ZipFile(wheels[0]) as zf:
        names = zf.namelist()
        meta = next(zf.read(n).decode() for n in names if n.endswith(".dist-info/METADATA"))
        zf.extractall(tmp_path)
    assert "tpmath/real/__main__.py" in names and "tpmath/ranks/__init__.py" in names
    assert "Provides-Extra: real" in meta and 'Requires-Dist: torch>=' in meta and 'extra == "real"' in meta
    env = dict(os.environ, PYTHONPATH=str(tmp_path), OMP_NUM_THREADS="1")
    where = subprocess.run([sys.executable, "-c", "import tpmath; print(tpmath.__file__)"], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=60)
    assert where.stdout.strip().startswith(str(tmp_path)), where
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
           "-m", "tpmath.real", "collective", "--name", "reduce-scatter", "--op", "max"]
    run = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=DEADLINE_S)
    assert run.returncode == 0, run.stderr[-2000:]
    want = ranks.expected_output("collective", {"name": "reduce-scatter", "op": "max"})["output"]
    assert [line for line in run.stdout.splitlines() if line.startswith("[rank ")] == want.splitlines()
