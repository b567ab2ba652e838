"""Command line over the core: ``python -m tpmath COMMAND … [--json]``.

Each command lives in its own module in this package and exposes ``NAME``,
``HELP``, ``add_arguments(parser)`` and ``run(args) -> dict``.  Output is one
JSON object (compact with ``--json``, indented otherwise).  Bad input prints a
single ``error: …`` line on stderr and exits with status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys

import numpy as np

from ..errors import TPMathError
from ..jsonio import to_jsonable

COMMAND_MODULES = (
    "mlp", "dp_tp", "precision", "row_linear", "column_linear", "collective",
    "ring", "mismatch", "vocab_ce", "vocab_pad", "comm_cost", "sp_layer", "memory", "attention", "layer",
)


class _Parser(argparse.ArgumentParser):
    """argparse that raises TPMathError instead of printing usage and exiting."""

    def error(self, message: str):  # noqa: D401 - argparse API
        raise TPMathError(message)


def build_parser() -> argparse.ArgumentParser:
    """The top-level parser with one sub-command per available command module."""
    parser = _Parser(prog="python -m tpmath", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", parser_class=_Parser, metavar="COMMAND")
    for mod_name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(f".{mod_name}", __name__)
        except ModuleNotFoundError as exc:  # a command whose core module is not written yet
            if exc.name and exc.name.startswith("tpmath"):
                continue
            raise
        p = sub.add_parser(mod.NAME, help=mod.HELP, description=mod.HELP)
        p.add_argument("--json", action="store_true", help="print one compact JSON object")
        mod.add_arguments(p)
        p.set_defaults(_run=mod.run)
    return parser


def _join_negative_values(argv: list[str]) -> list[str]:
    """``--shift -1e4`` → ``--shift=-1e4``: argparse would take ``-1e4`` for an option.

    (argparse only recognises plain negative numbers like ``-3`` or ``-0.5`` as values.)
    """
    out: list[str] = []
    for tok in argv:
        prev = out[-1] if out else ""
        if tok.startswith("-") and prev.startswith("--") and "=" not in prev and _is_number(tok):
            out[-1] = f"{prev}={tok}"
        else:
            out.append(tok)
    return out


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    """Run one command; return the process exit status (0 ok, 2 bad input)."""
    argv = sys.argv[1:] if argv is None else argv
    try:
        parser = build_parser()
        if not argv:
            raise TPMathError("no command given; run `python -m tpmath --help` for the list")
        if argv[0] in ("-h", "--help"):
            parser.print_help()
            return 0
        args = parser.parse_args(_join_negative_values(argv))
        if args.command is None:
            raise TPMathError("no command given; run `python -m tpmath --help`")
        # Overflow and invalid operations are detected and reported by the core itself
        # (TPMathError); numpy's RuntimeWarnings would only add noise before the error line.
        with np.errstate(all="ignore"):
            result = to_jsonable(args._run(args))
    except TPMathError as err:
        print(f"error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    text = json.dumps(result, separators=(",", ":"), ensure_ascii=False, allow_nan=False) if args.json \
        else json.dumps(result, indent=2, ensure_ascii=False, allow_nan=False)
    print(text)
    return 0
