"""``python -m tpmath attention``: multi-head attention with GQA, tensor-parallel by heads."""

from __future__ import annotations

import argparse

from ..attention import DEFAULTS, MISTAKES, run_attention

NAME = "attention"
# what the help strings (content/i18n/<lang>.cli.toml) quote, per option
HELP_ARGS = {"mistake": {"choices": MISTAKES}}



def add_common(parser: argparse.ArgumentParser) -> None:
    """Flags shared with ``layer``."""
    d = DEFAULTS
    parser.add_argument("--tp", default=str(d["tp"]))
    parser.add_argument("--heads", default=str(d["heads"]))
    parser.add_argument("--kv-heads", dest="kv_heads", default=None)
    parser.add_argument("--seq", default=str(d["seq"]))
    parser.add_argument("--batch", default=str(d["batch"]))
    parser.add_argument("--hidden", default=str(d["hidden"]))
    parser.add_argument("--seed", default=str(d["seed"]))
    parser.add_argument("--causal", action="store_true")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_common(parser)
    parser.add_argument("--mistake", default="none")
    parser.add_argument("--dtype-bytes", dest="dtype_bytes", default="2")


def run(args: argparse.Namespace) -> dict:
    return run_attention(tp=args.tp, heads=args.heads, kv_heads=args.kv_heads, seq=args.seq, batch=args.batch,
                         hidden=args.hidden, seed=args.seed, causal=args.causal, mistake=args.mistake,
                         dtype_bytes=args.dtype_bytes)
