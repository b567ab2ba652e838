"""``python -m tpmath layer``: a pre-LN transformer layer with tensor parallelism."""

from __future__ import annotations

import argparse

from ..layer import run_layer
from .attention import add_common

NAME = "layer"



def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common(parser)
    parser.add_argument("--ffn", default=None)


def run(args: argparse.Namespace) -> dict:
    return run_layer(tp=args.tp, heads=args.heads, kv_heads=args.kv_heads, seq=args.seq, batch=args.batch,
                     hidden=args.hidden, ffn=args.ffn, seed=args.seed, causal=args.causal)
