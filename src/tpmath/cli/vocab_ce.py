"""``vocab-ce``: vocab-parallel cross-entropy (Megatron's algorithm) next to the full-vocab
reference; ``vocab-pad``: Megatron's vocabulary padding (a multiple of 128 × tp) and each rank's
id range."""

from __future__ import annotations

import argparse

from ..vocab_ce import run_vocab_ce, vocab_pad_table
from . import Command


def _add_ce_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--logits")
    parser.add_argument("--target")
    parser.add_argument("--dtype", default="float64")
    parser.add_argument("--shards", default="2")
    parser.add_argument("--shift", default="0")
    parser.add_argument("--label-smoothing", dest="label_smoothing", default="0")
    parser.add_argument("--ignore-index", dest="ignore_index", default="-100")


def _ce(args: argparse.Namespace) -> dict:
    return run_vocab_ce(args.logits, args.target, shards=args.shards, shift=args.shift,
                        label_smoothing=args.label_smoothing, ignore_index=args.ignore_index,
                        dtype=args.dtype)


def _add_pad_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--vocab", required=True)
    parser.add_argument("--tp", required=True)
    parser.add_argument("--multiple", default="128")


def _pad(args: argparse.Namespace) -> dict:
    return vocab_pad_table(args.vocab, args.tp, args.multiple)


COMMANDS = (Command("vocab-ce", _add_ce_arguments, _ce), Command("vocab-pad", _add_pad_arguments, _pad))
