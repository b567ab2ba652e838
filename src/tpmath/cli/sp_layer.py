"""``python -m tpmath sp-layer``: the pre-LN MLP sub-block with tensor + sequence parallelism."""

from __future__ import annotations

import argparse

from ..sp_layer import BACKWARD_INPUTS, DEMO_DROPOUT, MISTAKES, run_sp_layer

NAME = "sp-layer"
# what the help strings (content/i18n/<lang>.cli.toml) quote, per option
HELP_ARGS = {"mistake": {"choices": MISTAKES}, "dropout": {"demo": DEMO_DROPOUT},
             "backward_input": {"choices": BACKWARD_INPUTS}}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of design.md §4."""
    parser.add_argument("--tp", default="2")
    parser.add_argument("--seq", default="4")
    parser.add_argument("--batch", default="2")
    parser.add_argument("--hidden", default="4")
    parser.add_argument("--ffn", default="8")
    parser.add_argument("--seed", default="0")
    parser.add_argument("--mistake", default="none")
    parser.add_argument("--dropout")
    parser.add_argument("--backward-input", dest="backward_input", default="regather")


def run(args: argparse.Namespace) -> dict:
    return run_sp_layer(tp=args.tp, seq=args.seq, batch=args.batch, hidden=args.hidden, ffn=args.ffn,
                        seed=args.seed, mistake=args.mistake, dropout=args.dropout,
                        backward_input=args.backward_input)
