"""``vocab-pad``: Megatron's vocabulary padding (a multiple of 128 × tp) and each rank's id range."""

from __future__ import annotations

import argparse

from ..vocab_ce import vocab_pad_table

NAME = "vocab-pad"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--vocab", required=True)
    parser.add_argument("--tp", required=True)
    parser.add_argument("--multiple", default="128")


def run(args: argparse.Namespace) -> dict:
    return vocab_pad_table(args.vocab, args.tp, args.multiple)
