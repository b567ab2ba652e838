"""``vocab-ce``: vocab-parallel cross-entropy (Megatron's algorithm) next to the full-vocab reference."""

from __future__ import annotations

import argparse

from ..vocab_ce import DEFAULT_LOGITS, DEFAULT_TARGET, run_vocab_ce

NAME = "vocab-ce"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--logits")
    parser.add_argument("--target")
    parser.add_argument("--dtype", default="float64")
    parser.add_argument("--shards", default="2")
    parser.add_argument("--shift", default="0")
    parser.add_argument("--label-smoothing", dest="label_smoothing", default="0")
    parser.add_argument("--ignore-index", dest="ignore_index", default="-100")


def run(args: argparse.Namespace) -> dict:
    return run_vocab_ce(args.logits, args.target, shards=args.shards, shift=args.shift,
                        label_smoothing=args.label_smoothing, ignore_index=args.ignore_index,
                        dtype=args.dtype)
