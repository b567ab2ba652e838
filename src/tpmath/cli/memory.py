"""``python -m tpmath memory``: memory per rank (parameters, gradients, optimizer, activations)."""

from __future__ import annotations

import argparse

from ..memory import ARCHS, OPTIMIZERS, PRESETS, RECOMPUTE, memory

NAME = "memory"
HELP = "memory per rank: activations (Korthikanti et al. 2022, Table 2), parameters, gradients, optimizer"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Sizes (or --preset), parallel settings and the optimizer convention."""
    parser.add_argument("--preset", help="one of: " + " ".join(PRESETS) + " (explicit flags win)")
    parser.add_argument("--seq", help="sequence length s")
    parser.add_argument("--batch", help="micro-batch size b (default 1)")
    parser.add_argument("--hidden", help="hidden size h")
    parser.add_argument("--heads", help="attention heads a")
    parser.add_argument("--kv-heads", dest="kv_heads", help="KV heads (GQA; default = heads)")
    parser.add_argument("--ffn", help="MLP width (default 4h)")
    parser.add_argument("--vocab", help="vocabulary size (parameters of the embedding, §4.3 extra activations)")
    parser.add_argument("--layers", help="number of layers L (default 1)")
    parser.add_argument("--arch", help=f"parameter layout: {', '.join(ARCHS)} (default gpt)")
    parser.add_argument("--tp", help="tensor-parallel size t (default 1)")
    parser.add_argument("--pp", help="pipeline-parallel size p (default 1); the first stage is reported")
    parser.add_argument("--dp", default="1", help="data-parallel size d (for --distributed-optimizer)")
    parser.add_argument("--sp", action="store_true", help="sequence parallelism")
    parser.add_argument("--recompute", default="none", help=f"{' | '.join(RECOMPUTE)} (default none)")
    parser.add_argument("--optimizer", default="megatron-bf16",
                        help=f"bytes per parameter: {', '.join(OPTIMIZERS)} (default megatron-bf16)")
    parser.add_argument("--distributed-optimizer", dest="distributed_optimizer", action="store_true",
                        help="shard the optimizer states over the d data-parallel ranks")
    parser.add_argument("--no-extras", dest="extras", action="store_false",
                        help="leave out the embedding / output-layer activations (§4.3)")


def run(args: argparse.Namespace) -> dict:
    return memory(seq=args.seq, batch=args.batch, hidden=args.hidden, heads=args.heads, tp=args.tp, sp=args.sp,
                  recompute=args.recompute, layers=args.layers, kv_heads=args.kv_heads, ffn=args.ffn,
                  vocab=args.vocab, pp=args.pp, dp=args.dp, optimizer=args.optimizer,
                  distributed_optimizer=args.distributed_optimizer, arch=args.arch, extras=args.extras,
                  preset=args.preset)
