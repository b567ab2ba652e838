"""Command line over the core: ``python -m tpmath COMMAND … [--json]``.

Each command lives in its own module in this package and exposes ``NAME``,
``HELP``, ``add_arguments(parser)`` and ``run(args) -> dict``.  Output is one
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

from ..cmdline import Parser, join_negative_values, quiet_on_closed_pipe, say_error, start
from ..errors import TPMathError
from ..jsonio import to_jsonable

# Every module of this package whose name does not start with "_" is a command.
COMMAND_MODULES = tuple(sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_")))


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one sub-command per available command module."""
    parser = Parser(prog="python -m tpmath", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", parser_class=Parser, metavar="COMMAND")
    for mod_name in COMMAND_MODULES:
        mod = importlib.import_module(f".{mod_name}", __name__)   # a broken command fails here, loudly
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        p.add_argument("--json", action="store_true", help="print one compact JSON object")
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


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
        parser = build_parser()
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
