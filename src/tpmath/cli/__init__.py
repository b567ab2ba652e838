"""Command line over the core: ``python -m tpmath COMMAND … [--json]``.

Each topic's commands live in its module in this package (one name per topic): a module of one
command exposes ``NAME``, ``add_arguments(parser)``, ``run(args) -> dict`` and, when its help
strings quote values, ``HELP_ARGS``; a module of several lists them as :class:`Command` records
in ``COMMANDS`` (``row_linear``: row-linear and column-linear).  The help itself is content (``content/i18n/<lang>.cli.toml``: ``cli.<NAME>.about``,
``cli.<NAME>.options.<dest>``, ``cli.<NAME>.epilog``), printed in the ``--lang`` language.  Output is one
JSON object (compact with ``--json``, indented otherwise).  Bad input prints a
single ``error: …`` line on stderr and exits with status 2, never a traceback.
Messages and the sentences inside results are in English, or in the language of
``--lang LANG`` (anywhere on the line; the languages are those of content/i18n).
"""

from __future__ import annotations

import argparse
import importlib
import json
import pkgutil
import sys
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .. import i18n
from ..cmdline import (Parser, help_formatter, join_negative_values, quiet_on_closed_pipe, say_error, say_help,
                       start)
from ..errors import TPMathError
from ..i18n import Text
from ..jsonio import to_jsonable

# Every module of this package whose name does not start with "_" holds commands.
COMMAND_MODULES = tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")))


@dataclass(frozen=True)
class Command:
    """One command of a module that holds several: what a module of one command defines itself."""

    NAME: str
    add_arguments: Callable
    run: Callable
    HELP_ARGS: dict = field(default_factory=dict)


def commands() -> list:
    """Every command (a module or a :class:`Command`), by command name, whatever its module's
    file name; a broken command module fails here, loudly."""
    modules = [importlib.import_module(f".{m}", __name__) for m in COMMAND_MODULES]
    return sorted((c for mod in modules for c in getattr(mod, "COMMANDS", (mod,))), key=lambda c: c.NAME)


def build_parser(lang: str = i18n.DEFAULT_LANG) -> argparse.ArgumentParser:
    """The top-level parser with one sub-command per command module, its help in ``lang``."""
    parser = _parser(lang, prog="python -m tpmath", description=say_help("cli.description", lang))
    # --lang is taken off the line before parsing (cmdline.take_lang); listed here for the help only.
    parser.add_argument("--lang", metavar="LANG", default=i18n.DEFAULT_LANG)
    _help_of(parser, "cli", lang, {"lang": {"choices": i18n.languages()}})
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help=say_help("cli.command", lang))
    for mod in commands():
        args = getattr(mod, "HELP_ARGS", {})
        about = say_help(f"cli.{mod.NAME}.about", lang, **args.get("about", {}))
        epilog = i18n.strings(lang).get(f"cli.{mod.NAME}.epilog")
        p = sub.add_parser(mod.NAME, help=about, description=about, epilog=epilog,
                           **help_formatter(lang, raw=epilog is not None))
        p.add_argument("--json", action="store_true")
        mod.add_arguments(p)
        _help_of(p, f"cli.{mod.NAME}.options", lang, args)
        p.set_defaults(_run=mod.run)
    return parser


def _help_of(parser: argparse.ArgumentParser, prefix: str, lang: str, args: dict) -> None:
    """Every option's help: ``<prefix>.<dest>`` (-h and --json share cli.help / cli.json), with
    ``{default}`` its default and the values ``args[dest]`` names."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        key = f"cli.{action.dest}" if action.dest in ("help", "json") else f"{prefix}.{action.dest}"
        action.help = say_help(key, lang, default=action.default, **args.get(action.dest, {}))


def _parser(lang: str, **kw) -> Parser:
    return Parser(**kw, **help_formatter(lang))


def main(argv: list[str] | None = None) -> int:
    """Run one command; return the process exit status (0 ok, 2 bad input, 1 the reader of
    stdout went away: ``python -m tpmath … | head``)."""
    return quiet_on_closed_pipe(lambda: _main(sys.argv[1:] if argv is None else argv))


def _main(argv: list[str]) -> int:
    started = start(argv)
    if started is None:
        return 2
    lang, argv = started
    try:
        parser = build_parser(lang)
        if not argv:
            raise TPMathError("no_command", prog=parser.prog)
        if argv[0] in ("-h", "--help"):
            parser.print_help()
            return 0
        args = parser.parse_args(join_negative_values(argv))
        if args.command is None:
            raise TPMathError("no_command", prog=parser.prog)
        # Overflow and invalid operations are detected and reported by the core itself
        # (TPMathError); numpy's RuntimeWarnings would only add noise before the error line.
        with np.errstate(all="ignore"):
            result = to_jsonable(args._run(args), lang)
    except TPMathError as err:
        say_error(err, lang)
        return 2
    text = json.dumps(result, separators=(",", ":"), ensure_ascii=False, allow_nan=False) if args.json \
        else json.dumps(result, indent=2, ensure_ascii=False, allow_nan=False)
    print(text)
    sys.stdout.flush()              # a closed pipe shows here, inside main, not at exit
    return 0
