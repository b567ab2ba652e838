"""``row-linear``: Megatron's row-parallel linear Y = X A (X split along in, A along its rows)."""

from __future__ import annotations

import argparse

from ..row_linear import random_inputs, run_row_linear
from ._linear_args import add_linear_arguments, linear_inputs

NAME = "row-linear"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_linear_arguments(parser)


def run(args: argparse.Namespace) -> dict:
    X, A, dY = linear_inputs(args, random_inputs)
    return run_row_linear(X, A, dY, tp=args.tp, bias=args.bias)
