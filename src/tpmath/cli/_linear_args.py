"""Flags shared by ``row-linear`` and ``column-linear`` (not a command itself)."""

from __future__ import annotations

import argparse
from typing import Callable

from ..errors import TPMathError


def add_linear_arguments(parser: argparse.ArgumentParser) -> None:
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


def linear_inputs(args: argparse.Namespace, random_inputs: Callable) -> tuple:
    """(X, A, dY): the given matrices (None = defaults) or random ones when --seed is set."""
    if args.seed is None:
        return args.x, args.a, args.dy
    if args.x is not None or args.a is not None or args.dy is not None:
        raise TPMathError("seed_or_matrices", "seed", value=args.seed)
    d = random_inputs(args.seed, args.batch, args.d_in, args.d_out)
    return d["X"], d["A"], d["dY"]
