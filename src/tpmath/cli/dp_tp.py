"""``python -m tpmath dp-tp``: DP × TP gradient coefficients, the correct and the wrong reductions."""

from __future__ import annotations

import argparse

from ..dp_tp import run_dp_tp

NAME = "dp-tp"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tp", default="2")
    parser.add_argument("--dp", default="2")
    parser.add_argument("--seed", default="0")
    parser.add_argument("--batch", default="2")
    parser.add_argument("--d-model", dest="d_model", default="2")
    parser.add_argument("--d-ff", dest="d_ff", default=None)


def run(args: argparse.Namespace) -> dict:
    return run_dp_tp(tp=args.tp, dp=args.dp, seed=args.seed, batch=args.batch,
                     d_model=args.d_model, d_ff=args.d_ff)
