"""The command line's help is content: every option has a help string in every language
(content/i18n/<lang>.cli.toml), ``--lang`` picks the language, and no help text is left in code."""

from __future__ import annotations

import argparse
import ast
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tpmath import i18n
from tpmath.cli import build_parser, commands as all_commands

ROOT = Path(__file__).resolve().parents[1]
CLI_DIR = ROOT / "src" / "tpmath" / "cli"
HELP_KEYWORDS = {"help", "description", "epilog", "usage", "title"}


def _commands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "tpmath", *args], capture_output=True, text=True, timeout=120,
                          env=env)


def test_the_help_strings_are_in_every_language():
    langs = i18n.languages()
    assert len(langs) >= 2
    keys = {lang: {k for k in i18n.strings(lang) if k.startswith("cli.")} for lang in langs}
    assert keys["en"] and all(keys[lang] == keys["en"] for lang in langs)


@pytest.mark.parametrize("lang", i18n.languages())
def test_every_option_of_every_command_has_help_in_the_language(lang):
    strings = i18n.strings(lang)
    parser = build_parser(lang)
    commands = _commands(parser)
    assert list(commands) == [c.NAME for c in all_commands()]     # every command of every module, once
    for name, sub in [("", parser), *commands.items()]:
        assert sub.description and not sub.description.startswith("cli."), name
        for action in sub._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            shown = action.help
            # every placeholder filled, never the bare key (a key without a string shows as itself)
            assert shown and not shown.startswith("cli.") and not re.search(r"\{\w+\}", shown), (name, action.dest)
        key = f"cli.{name}.options." if name else "cli."
        for action in sub._actions:
            if name and action.dest not in ("help", "json"):
                assert f"{key}{action.dest}" in strings, (lang, name, action.dest)


def test_lang_zh_prints_chinese_help_and_the_default_english():
    zh, en = i18n.strings("zh"), i18n.strings("en")
    out = run("--lang", "zh", "mlp", "--help")
    assert out.returncode == 0 and not out.stderr
    flat = " ".join(out.stdout.split())          # argparse wraps long lines
    assert zh["cli.mlp.about"] in flat
    assert zh["cli.mlp.options.tp"].replace("{default}", "2") in flat
    assert zh["cli.help"] in flat and out.stdout.startswith(zh["cli.usage"])
    assert en["cli.mlp.about"] not in flat
    # headings end with the language's own colon, never argparse's ASCII one after a Chinese word
    assert "\n选项：\n" in out.stdout and "选项:" not in out.stdout
    out = run("mlp", "--help")
    assert "\noptions:\n" in out.stdout and "options::" not in out.stdout
    flat = " ".join(out.stdout.split())
    assert out.returncode == 0 and en["cli.mlp.about"] in flat and zh["cli.mlp.about"] not in flat
    assert en["cli.mlp.options.dtype"].replace("{choices}", "float64, float32, float16").replace(
        "{default}", "float64") in flat
    # the top level too, --lang anywhere on the line
    out = run("--help", "--lang=zh")
    assert out.returncode == 0 and " ".join(zh["cli.description"].split()) in " ".join(out.stdout.split())


def _is_text(node: ast.AST) -> bool:
    """A literal sentence: a string constant, an f-string, or strings joined with +."""
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    return isinstance(node, ast.BinOp) and (_is_text(node.left) or _is_text(node.right))


@pytest.mark.parametrize("path", sorted(CLI_DIR.glob("*.py")), ids=lambda p: p.name)
def test_no_help_text_left_in_the_cli_code(path):
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg in HELP_KEYWORDS:
            assert not _is_text(node.value), f"{path.name}:{node.value.lineno}: {node.arg}= is text in code"
        if isinstance(node, ast.Assign) and _is_text(node.value):     # HELP = "…", action.help = "…"
            for target in node.targets:
                name = target.id if isinstance(target, ast.Name) else getattr(target, "attr", "")
                assert name.lower() not in ("help", "epilog", "description"), f"{path.name}:{node.lineno}: {name}"


def test_argparse_messages_are_said_in_the_lang_language():
    zh, en = i18n.strings("zh"), i18n.strings("en")
    keys = sorted(k for k in en if k.startswith("cli.argparse."))
    assert keys and all(k in zh and zh[k] != en[k] for k in keys)
    # each English text is a message id argparse really uses (else the Chinese one is never said)
    source = inspect.getsource(argparse)
    assert [k for k in keys if f"_('{en[k]}')" not in source] == []
    cases = [(["mlp", "--bogus", "1"], "cli.argparse.unrecognized", "--bogus 1"),
             (["comm-cost"], "cli.argparse.required", "--tp")]
    for argv, key, arg in cases:
        for lang, said in (("zh", zh), ("en", en)):
            out = run("--lang", lang, *argv)
            lines = out.stderr.splitlines()
            assert out.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ")
            assert said[key].replace("%s", arg) in lines[0], (lang, lines)
    out = run("--lang", "zh", "mlp", "--tp")
    assert zh["cli.argparse.argument"] % {"argument_name": "--tp", "message": zh["cli.argparse.expected_one"]} in out.stderr


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_real_runner_help_is_content_in_both_languages(lang):
    from tpmath import ranks
    from tpmath.real.__main__ import build_parser as build_real

    said = i18n.strings(lang)
    parser = build_real(lang)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert set(sub.choices) == set(ranks.TOPICS)
    for name, topic in ranks.TOPICS.items():
        assert sub.choices[name].description == said[f"cli.real.{name}.about"]
        helps = {a.dest: a.help for a in sub.choices[name]._actions}
        for o in topic.options:
            key = f"cli.real.{name}.options.{o.dest}"
            assert key in said and helps[o.dest] and "{" not in helps[o.dest], (key, helps[o.dest])
            if "{default}" in said[key]:
                assert str(o.default) in helps[o.dest]
        for dest, args in topic.help_args.items():      # the values the help quotes are the checked ones
            for value in args.get("choices", ()):
                assert value in helps[dest]
    # the records carry no prose: the help strings are only in content/i18n
    assert not any(hasattr(t, "help") for t in ranks.TOPICS.values())
    assert not any(hasattr(o, "help") for t in ranks.TOPICS.values() for o in t.options)
    out = subprocess.run([sys.executable, "-m", "tpmath.real", "--lang", lang, "vocab-ce", "--help"],
                         capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})
    assert out.returncode == 0
    assert " ".join(said["cli.real.vocab-ce.about"].split()) in " ".join(out.stdout.split())


def _valued_options(parser: argparse.ArgumentParser, where: str):
    """(where, dest) of every option of every sub-command of ``parser`` that takes a value argparse
    does not check itself (no ``choices=``): the values the core validates and errors name.  (The
    top level's only option, --lang, is taken off the line before parsing, with its own message.)"""
    for name, sub in _commands(parser).items():
        for action in sub._actions:
            if isinstance(action, argparse._StoreAction) and action.choices is None:
                yield f"{where} {name}", action.dest


def test_every_option_an_error_can_name_has_a_name_in_every_language():
    """An error calls an option ``name.<dest>`` (content/i18n/<lang>.errors.toml); without it the
    reader sees the bare key (``error: name.multiplier must be …``).  A matrix option is named by
    its symbol (``--w1``: ``name.W1``).  Options from the parsers: every command, every topic."""
    import tomllib

    from tpmath import ranks
    from tpmath.real.__main__ import build_parser as build_real

    options = [*_valued_options(build_parser("en"), "python -m tpmath"),
               *_valued_options(build_real("en"), "tpmath.real")]
    # the real runner's options are its records' (nothing the parser adds on its own escapes the check)
    assert {(f"tpmath.real {t}", o.dest) for t, topic in ranks.TOPICS.items() for o in topic.options
            if not o.flag} <= set(options)
    assert len(options) > 50, options
    langs = i18n.languages()
    assert len(langs) >= 2
    for lang in langs:
        path = ROOT / "content" / "i18n" / f"{lang}.errors.toml"
        names = tomllib.loads(path.read_text(encoding="utf-8"))["name"]
        missing = sorted({(where, dest) for where, dest in options if dest not in names and dest.upper() not in names})
        assert missing == [], f"{path.name} lacks name.<dest> for {missing}"
