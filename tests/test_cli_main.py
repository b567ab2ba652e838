"""The command-line frame: one JSON object out, one `error:` line and exit 2 for bad input."""

import json
import subprocess
import sys

import pytest


def run(*args):
    return subprocess.run([sys.executable, "-m", "tpmath", *args], capture_output=True, text=True, timeout=120)


def test_help_lists_commands():
    out = run("--help")
    assert out.returncode == 0
    for name in ("mlp", "collective", "vocab-ce", "row-linear", "comm-cost"):
        assert name in out.stdout


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
