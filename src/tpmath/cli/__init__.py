"""Command line over the core: ``python -m tpmath COMMAND … [--json]``.

Each command lives in its own module in this package and exposes ``NAME``,
``add_arguments(parser)``, ``run(args) -> dict`` and, when its help strings quote values,
``HELP_ARGS``.  The help itself is content (``content/i18n/<lang>.cli.toml``: ``cli.<NAME>.about``,
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

import numpy as np

from .. import i18n
from ..cmdline import Parser, join_negative_values, quiet_on_closed_pipe, say_error, start
from ..errors import TPMathError
from ..i18n import Text
from ..jsonio import to_jsonable

# Every module of this package whose name does not start with "_" is a command.
COMMAND_MODULES = tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")))


def build_parser(lang: str = i18n.DEFAULT_LANG) -> argparse.ArgumentParser:
    """The top-level parser with one sub-command per command module, its help in ``lang``."""
    parser = _parser(lang, prog="python -m tpmath", description=_say("cli.description", lang))
    # --lang is taken off the line before parsing (cmdline.take_lang); listed here for the help only.
    parser.add_argument("--lang", metavar="LANG", default=i18n.DEFAULT_LANG)
    _help_of(parser, "cli", lang, {"lang": {"choices": i18n.languages()}})
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help=_say("cli.command", lang))
    for mod_name in COMMAND_MODULES:
        mod = importlib.import_module(f".{mod_name}", __name__)   # a broken command fails here, loudly
        args = getattr(mod, "HELP_ARGS", {})
        about = _say(f"cli.{mod.NAME}.about", lang, **args.get("about", {}))
        epilog = i18n.strings(lang).get(f"cli.{mod.NAME}.epilog")
        p = sub.add_parser(mod.NAME, help=about, description=about, epilog=epilog,
                           **_parser_options(lang, raw=epilog is not None))
        p.add_argument("--json", action="store_true")
        mod.add_arguments(p)
        _help_of(p, f"cli.{mod.NAME}.options", lang, args)
        p.set_defaults(_run=mod.run)
    return parser


def _say(key: str, lang: str, **args) -> str:
    """A help string in ``lang``; a list of values is quoted comma-separated.  (argparse
    %-formats help strings, so a literal % is doubled.)"""
    args = {k: ", ".join(map(str, v)) if isinstance(v, (tuple, list)) else str(v) for k, v in args.items()}
    return i18n.text(Text(key, **args), lang).replace("%", "%%")


def _help_of(parser: argparse.ArgumentParser, prefix: str, lang: str, args: dict) -> None:
    """Every option's help: ``<prefix>.<dest>`` (-h and --json share cli.help / cli.json), with
    ``{default}`` its default and the values ``args[dest]`` names."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        key = f"cli.{action.dest}" if action.dest in ("help", "json") else f"{prefix}.{action.dest}"
        action.help = _say(key, lang, default=action.default, **args.get(action.dest, {}))


def _parser(lang: str, **kw) -> Parser:
    return Parser(**kw, **_parser_options(lang))


# argparse's section headings -> their keys
_HEADINGS = {"positional arguments": "cli.positionals", "options": "cli.options"}


def _parser_options(lang: str, raw: bool = False) -> dict:
    """What every parser of ``lang`` is made with: a formatter that says argparse's own words
    (``usage:``, the section headings) in ``lang``; ``raw`` keeps a pre-wrapped epilog's lines."""
    base = argparse.RawDescriptionHelpFormatter if raw else argparse.HelpFormatter

    class Formatter(base):
        def add_usage(self, usage, actions, groups, prefix=None):
            super().add_usage(usage, actions, groups, _say("cli.usage", lang) if prefix is None else prefix)

        # A heading's string carries its own colon (the language's: full-width in Chinese);
        # argparse appends an ASCII one, which is taken off again below.
        def start_section(self, heading):
            super().start_section(_say(_HEADINGS[heading], lang) if heading in _HEADINGS else heading)

        def format_help(self):
            text = super().format_help()
            for key in _HEADINGS.values():
                said = _say(key, lang)
                text = text.replace(f"{said}:\n", f"{said}\n")
            return text

    return {"formatter_class": Formatter}


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
