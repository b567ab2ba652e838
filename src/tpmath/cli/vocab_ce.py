"""``vocab-ce``: vocab-parallel cross-entropy (Megatron's algorithm) next to the full-vocab reference."""

from __future__ import annotations

import argparse

from ..vocab_ce import DEFAULT_LOGITS, DEFAULT_TARGET, run_vocab_ce

NAME = "vocab-ce"
HELP = "vocab-parallel cross-entropy: per-rank max / Σexp / target logit, loss, probabilities, gradient"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--logits", help="logits (V,) or (positions, V) as JSON "
                        f"(default the seed's {DEFAULT_LOGITS} with target {DEFAULT_TARGET})")
    parser.add_argument("--target", help="target token id, or a JSON list for 2-D logits")
    parser.add_argument("--dtype", default="float64", help="float64 | float32 | float16")
    parser.add_argument("--shards", default="2", help="number of vocab shards (pads V if it does not divide)")
    parser.add_argument("--shift", default="0", help="constant added to every logit (|shift| <= 1e4)")
    parser.add_argument("--label-smoothing", dest="label_smoothing", default="0",
                        help="ε in [0, 1], as PyTorch F.cross_entropy(label_smoothing=ε)")
    parser.add_argument("--ignore-index", dest="ignore_index", default="-100",
                        help="target value whose positions are ignored (default -100)")


def run(args: argparse.Namespace) -> dict:
    return run_vocab_ce(args.logits, args.target, shards=args.shards, shift=args.shift,
                        label_smoothing=args.label_smoothing, ignore_index=args.ignore_index,
                        dtype=args.dtype)
