"""``python -m tpmath precision``: sharded vs unsharded per dtype, and one SGD step."""

from __future__ import annotations

import argparse

from ..precision import run_precision

NAME = "precision"
HELP = "MLP and vocab-parallel CE in float64/32/16: sharded vs unsharded next to the tolerance; one SGD step"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tp", default="2", help="tensor-parallel size (= CE vocab shards); must divide d_ff")
    parser.add_argument("--lr", default="0.1", help="SGD learning rate (default 0.1)")
    parser.add_argument("--x", help="X as a JSON matrix; default the seed's")
    parser.add_argument("--w1", help="W1 as a JSON matrix")
    parser.add_argument("--w2", help="W2 as a JSON matrix")
    parser.add_argument("--g", help="upstream gradient G as a JSON matrix")


def run(args: argparse.Namespace) -> dict:
    return run_precision(tp=args.tp, lr=args.lr, X=args.x, W1=args.w1, W2=args.w2, G=args.g)
