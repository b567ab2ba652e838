"""``python -m tpmath mlp``: the column→row tensor-parallel MLP next to its unsharded reference."""

from __future__ import annotations

import argparse

from ..mlp import command_line_inputs, run_mlp
from ..validate import DTYPES

NAME = "mlp"
HELP = "column→row tensor-parallel MLP (tanh, L = Σ Y⊙G): per-rank shards, reference, errors"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of design.md §4."""
    parser.add_argument("--tp", default="2", help="tensor-parallel size; must divide d_ff (default 2)")
    parser.add_argument("--dtype", default="float64", help=f"one of {', '.join(DTYPES)} (default float64)")
    parser.add_argument("--x", help="X as a JSON matrix (batch × d_model); default the seed's [[1,2],[3,-1]]")
    parser.add_argument("--w1", help="W1 as a JSON matrix (d_model × d_ff)")
    parser.add_argument("--w2", help="W2 as a JSON matrix (d_ff × d_model)")
    parser.add_argument("--g", help="upstream gradient G = G_Y as a JSON matrix (batch × d_model)")
    parser.add_argument("--seed", help="random inputs from this seed (with --batch --d-model --d-ff); "
                                       "explicit --x/--w1/--w2/--g override them")
    parser.add_argument("--batch", help="random inputs: batch (default 4)")
    parser.add_argument("--d-model", dest="d_model", help="random inputs: d_model (default 4)")
    parser.add_argument("--d-ff", dest="d_ff", help="random inputs: d_ff (default 24)")


def run(args: argparse.Namespace) -> dict:
    """Build the inputs (defaults, random or explicit) and run the core."""
    inputs = command_line_inputs(args.x, args.w1, args.w2, args.g, seed=args.seed, batch=args.batch,
                                 d_model=args.d_model, d_ff=args.d_ff)
    return run_mlp(**inputs, tp=args.tp, dtype=args.dtype)
