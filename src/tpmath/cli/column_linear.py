"""``column-linear``: Megatron's column-parallel linear Y = X A (A split along its columns)."""

from __future__ import annotations

import argparse

from ..row_linear import random_inputs, run_column_linear
from ._linear_args import add_linear_arguments, linear_inputs

NAME = "column-linear"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_linear_arguments(parser)
    parser.add_argument("--no-gather-output", dest="gather_output", action="store_false")


def run(args: argparse.Namespace) -> dict:
    X, A, dY = linear_inputs(args, random_inputs)
    return run_column_linear(X, A, dY, tp=args.tp, gather_output=args.gather_output, bias=args.bias)
