"""``python -m tpmath memory``: memory per rank (parameters, gradients, optimizer, activations)."""

from __future__ import annotations

import argparse

from ..memory import ARCHS, ATTENTION, OPTIMIZERS, PRESETS, RECOMPUTE, memory

NAME = "memory"
# what the help strings (content/i18n/<lang>.cli.toml) quote, per option
HELP_ARGS = {"preset": {"choices": tuple(PRESETS)}, "arch": {"choices": ARCHS}, "recompute": {"choices": RECOMPUTE},
             "optimizer": {"choices": tuple(OPTIMIZERS)}, "attention": {"choices": ATTENTION}}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Sizes (or --preset), parallel settings and the optimizer convention."""
    parser.add_argument("--preset")
    parser.add_argument("--seq")
    parser.add_argument("--batch")
    parser.add_argument("--hidden")
    parser.add_argument("--heads")
    parser.add_argument("--kv-heads", dest="kv_heads")
    parser.add_argument("--ffn")
    parser.add_argument("--vocab")
    parser.add_argument("--layers")
    parser.add_argument("--arch")
    parser.add_argument("--tp")
    parser.add_argument("--pp")
    parser.add_argument("--dp", default="1")
    parser.add_argument("--sp", action="store_true")
    parser.add_argument("--recompute", default="none")
    parser.add_argument("--attention", default="eager")
    parser.add_argument("--optimizer", default="megatron-bf16")
    parser.add_argument("--distributed-optimizer", dest="distributed_optimizer", action="store_true")
    parser.add_argument("--no-extras", dest="extras", action="store_false")


def run(args: argparse.Namespace) -> dict:
    return memory(seq=args.seq, batch=args.batch, hidden=args.hidden, heads=args.heads, tp=args.tp, sp=args.sp,
                  recompute=args.recompute, layers=args.layers, kv_heads=args.kv_heads, ffn=args.ffn,
                  vocab=args.vocab, pp=args.pp, dp=args.dp, optimizer=args.optimizer,
                  distributed_optimizer=args.distributed_optimizer, arch=args.arch, extras=args.extras,
                  preset=args.preset, attention=args.attention)
