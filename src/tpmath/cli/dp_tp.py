"""``python -m tpmath dp-tp``: DP × TP gradient coefficients, the correct and the wrong reductions."""

from __future__ import annotations

import argparse

from ..dp_tp import run_dp_tp

NAME = "dp-tp"
HELP = "dp replicas × tp ranks: TP sums partial G_X, DP averages shard gradients; wrong variants measured"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tp", default="2", help="tensor-parallel size (default 2)")
    parser.add_argument("--dp", default="2", help="data-parallel replicas (default 2)")
    parser.add_argument("--seed", default="0", help="seed of the micro-batches and weights (default 0)")
    parser.add_argument("--batch", default="2", help="rows per micro-batch (default 2)")
    parser.add_argument("--d-model", dest="d_model", default="2", help="d_model (default 2)")
    parser.add_argument("--d-ff", dest="d_ff", default=None, help="d_ff (default 2·tp)")


def run(args: argparse.Namespace) -> dict:
    return run_dp_tp(tp=args.tp, dp=args.dp, seed=args.seed, batch=args.batch,
                     d_model=args.d_model, d_ff=args.d_ff)
