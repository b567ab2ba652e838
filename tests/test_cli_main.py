"""The command-line frame: one JSON object out, one `error:` line and exit 2 for bad input."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest


SRC = str(Path(__file__).resolve().parents[1] / "src")


def run(*args):
    """``python -m tpmath`` of this checkout (not whatever tpmath is installed)."""
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "tpmath", *args], capture_output=True, text=True, timeout=120,
                          env=env)


def test_help_lists_commands():
    out = run("--help")
    assert out.returncode == 0
    for name in ("mlp", "collective", "vocab-ce", "row-linear", "comm-cost"):
        assert name in out.stdout


def test_every_command_module_is_a_core_topic_and_the_commands_stay_the_same():
    """One name per topic: cli/<topic>.py holds that core module's commands (row_linear: row-linear
    and column-linear; vocab_ce: vocab-ce and vocab-pad); the command names are the ones the
    README, design.md and the pages' copied command lines use."""
    from tpmath.cli import COMMAND_MODULES, commands

    core = {p.stem for p in Path(SRC, "tpmath").glob("*.py")}
    assert set(COMMAND_MODULES) <= core, set(COMMAND_MODULES) - core
    assert [c.NAME for c in commands()] == ["attention", "collective", "column-linear", "comm-cost", "dp-tp", "layer",
                                            "memory", "mismatch", "mlp", "precision", "ring", "row-linear", "sp-layer",
                                            "vocab-ce", "vocab-pad"]
    out = run("--help")
    assert all(c.NAME in out.stdout for c in commands())


@pytest.mark.parametrize("args", [("no-such-command",), ("mlp", "--tp"), ("mlp", "--bogus", "1"), ()])
def test_bad_usage_is_one_error_line(args):
    out = run(*args)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), out.stderr
    assert "Traceback" not in out.stderr


def test_json_is_one_object():
    out = run("collective", "all-reduce", "--inputs", "[[1,2],[3,4]]", "--json")
    assert out.returncode == 0, out.stderr
    assert len(out.stdout.strip().splitlines()) == 1
    data = json.loads(out.stdout)
    assert data["outputs"] == [[4.0, 6.0], [4.0, 6.0]]


@pytest.mark.parametrize("args, needle", [
    (("collective", "all-reduce", "--inputs", "[[1e308],[1e308]]"), "overflows"),
    (("collective", "all-reduce", "--op", "prod", "--inputs", "[[1e200],[1e200]]"), "overflows"),
    (("row-linear", "--tp", "1", "--x", "[[1e200,1e200]]", "--a", "[[1e200],[1e200]]", "--dy", "[[1]]"), "overflows"),
    (("dp-tp", "--tp", "1", "--dp", "1", "--batch", "1", "--d-model", "1", "--d-ff", "1", "--seed", "20"), "all zero"),
    (("comm-cost", "--batch", "1e30", "--seq", "1", "--hidden", "8", "--tp", "2"), "must be between 1 and"),
])
def test_overflow_and_degenerate_inputs_are_errors_not_nulls(args, needle):
    """Found in review: these used to print null (NaN/inf) with numpy warnings on stderr."""
    out = run(*args, "--json")
    assert out.returncode == 2 and out.stdout == ""
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("error: ") and needle in out.stderr, out.stderr


def test_negative_numbers_as_option_values():
    out = run("vocab-ce", "--shift", "-1e4", "--json")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["shift"] == -1e4


def test_section_module_table_matches_the_modules():
    """views.SECTION_MODULES (lazy imports in the browser) names the module defining each section."""
    import importlib
    import pkgutil

    from tpmath import views
    found = {}
    for info in pkgutil.iter_modules(views.__path__):    # every module, listed or not
        for name in getattr(importlib.import_module(f"tpmath.views.{info.name}"), "SECTIONS", {}):
            found[name] = info.name
    assert found == views.SECTION_MODULES
    assert set(views.sections()) == set(found)


@pytest.mark.parametrize("args", [("ring", "--ranks", "64", "--count", "100000"),
                                  ("ring", "--ranks", "64", "--count", "100000", "--json")])
def test_a_reader_that_closes_the_pipe_ends_it_quietly(args):
    """Issue 12 item 22: `python -m tpmath … | head` must not print a BrokenPipeError traceback.
    The output (megabytes) is far larger than the pipe buffer, so the write really fails."""
    import os
    import shlex
    env = {**os.environ, "PYTHONPATH": str(__import__("pathlib").Path(__file__).resolve().parents[1] / "src")}
    cmd = f"{shlex.quote(sys.executable)} -m tpmath {' '.join(args)} | head -c 100; exit ${{PIPESTATUS[0]}}"
    out = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=120, env=env)
    assert len(out.stdout) == 100
    assert out.stderr == "", out.stderr
    assert out.returncode == 1          # the output was cut short: not a success, not bad input
