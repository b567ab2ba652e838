"""``python -m tpmath sp-layer``: the pre-LN MLP sub-block with tensor + sequence parallelism."""

from __future__ import annotations

import argparse

from ..sp_layer import DEMO_DROPOUT, MISTAKES, run_sp_layer

NAME = "sp-layer"
HELP = "Y = X + tanh(LN(X) W1) W2 with sequence parallelism: per-rank shards, reference, plain TP, comm"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of design.md §4."""
    parser.add_argument("--tp", default="2", help="tensor-parallel size; must divide --seq and --ffn (default 2)")
    parser.add_argument("--seq", default="4", help="sequence length S (default 4)")
    parser.add_argument("--batch", default="2", help="batch B (default 2)")
    parser.add_argument("--hidden", default="4", help="hidden size D (default 4)")
    parser.add_argument("--ffn", default="8", help="MLP width F (default 8)")
    parser.add_argument("--seed", default="0", help="inputs from numpy.random.default_rng(seed) (default 0)")
    parser.add_argument("--mistake", default="none", help=f"one of {', '.join(MISTAKES)} (default none)")
    parser.add_argument("--dropout", help=f"dropout probability p in [0, 0.9] (default 0; {DEMO_DROPOUT} "
                                          "with --mistake same-dropout-seed)")


def run(args: argparse.Namespace) -> dict:
    return run_sp_layer(tp=args.tp, seq=args.seq, batch=args.batch, hidden=args.hidden, ffn=args.ffn,
                        seed=args.seed, mistake=args.mistake, dropout=args.dropout)
