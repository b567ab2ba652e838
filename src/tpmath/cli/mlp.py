"""``python -m tpmath mlp``: the column→row tensor-parallel MLP next to its unsharded reference."""

from __future__ import annotations

import argparse

from ..mlp import command_line_inputs, run_mlp
from ..validate import DTYPES

NAME = "mlp"
# what the help strings (content/i18n/<lang>.cli.toml) quote, per option
HELP_ARGS = {"dtype": {"choices": DTYPES}}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of design.md §4."""
    parser.add_argument("--tp", default="2")
    parser.add_argument("--dtype", default="float64")
    parser.add_argument("--x")
    parser.add_argument("--w1")
    parser.add_argument("--w2")
    parser.add_argument("--g")
    parser.add_argument("--seed")
    parser.add_argument("--batch")
    parser.add_argument("--d-model", dest="d_model")
    parser.add_argument("--d-ff", dest="d_ff")


def run(args: argparse.Namespace) -> dict:
    """Build the inputs (defaults, random or explicit) and run the core."""
    inputs = command_line_inputs(args.x, args.w1, args.w2, args.g, seed=args.seed, batch=args.batch,
                                 d_model=args.d_model, d_ff=args.d_ff)
    return run_mlp(**inputs, tp=args.tp, dtype=args.dtype)
