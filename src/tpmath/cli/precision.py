"""``python -m tpmath precision``: sharded vs unsharded per dtype, and one SGD step."""

from __future__ import annotations

import argparse

from ..precision import run_precision

NAME = "precision"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tp", default="2")
    parser.add_argument("--lr", default="0.1")
    parser.add_argument("--x")
    parser.add_argument("--w1")
    parser.add_argument("--w2")
    parser.add_argument("--g")


def run(args: argparse.Namespace) -> dict:
    return run_precision(tp=args.tp, lr=args.lr, X=args.x, W1=args.w1, W2=args.w2, G=args.g)
