"""``row-linear`` and ``column-linear``: Megatron's row-parallel linear Y = X A (X split along
in, A along its rows) and its column-parallel linear (A split along its columns)."""

from __future__ import annotations

import argparse

from ..errors import TPMathError
from ..row_linear import random_inputs, run_column_linear, run_row_linear
from . import Command


def _add_linear_arguments(parser: argparse.ArgumentParser) -> None:
    """--tp, explicit matrices (--x --a --dy --bias) or random ones (--seed --batch --d-in --d-out)."""
    parser.add_argument("--tp", default="2")
    parser.add_argument("--x")
    parser.add_argument("--a")
    parser.add_argument("--dy")
    parser.add_argument("--bias")
    parser.add_argument("--seed")
    parser.add_argument("--batch", default="2")
    parser.add_argument("--d-in", dest="d_in", default="4")
    parser.add_argument("--d-out", dest="d_out", default="4")


def _inputs(args: argparse.Namespace) -> tuple:
    """(X, A, dY): the given matrices (None = defaults) or random ones when --seed is set."""
    if args.seed is None:
        return args.x, args.a, args.dy
    if args.x is not None or args.a is not None or args.dy is not None:
        raise TPMathError("seed_or_matrices", "seed", value=args.seed)
    d = random_inputs(args.seed, args.batch, args.d_in, args.d_out)
    return d["X"], d["A"], d["dY"]


def _add_column_arguments(parser: argparse.ArgumentParser) -> None:
    _add_linear_arguments(parser)
    parser.add_argument("--no-gather-output", dest="gather_output", action="store_false")


def _row(args: argparse.Namespace) -> dict:
    X, A, dY = _inputs(args)
    return run_row_linear(X, A, dY, tp=args.tp, bias=args.bias)


def _column(args: argparse.Namespace) -> dict:
    X, A, dY = _inputs(args)
    return run_column_linear(X, A, dY, tp=args.tp, gather_output=args.gather_output, bias=args.bias)


COMMANDS = (Command("row-linear", _add_linear_arguments, _row),
            Command("column-linear", _add_column_arguments, _column))
