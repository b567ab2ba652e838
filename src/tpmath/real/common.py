"""What every real example shares: the launch, Megatron's f / g / gather operators, output.

Each process is one rank (torchrun sets RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR/PORT).
Tensors stay on the rank's device (CPU for gloo, ``cuda:LOCAL_RANK`` for nccl); they come
back to numpy only to be printed.
"""

from __future__ import annotations

import datetime
import os
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from .. import ranks
from ..errors import TPMathError

def import_torch():
    """``torch``, or a one-line error saying how to install it (the core never needs it)."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError as exc:
        raise TPMathError("no_torch", detail=str(exc)) from None
    if not dist.is_available():
        raise TPMathError("no_torch_distributed")
    return torch


def launch_env(p: dict, extra: tuple[str, ...] = (), lang: str = "en") -> tuple[int, int, int]:
    """(rank, world size, local rank) from torchrun's environment; errors name the command
    (with ``extra``, the run's own flags such as ``--backend nccl``, and ``--lang``)."""
    cmd = " ".join([ranks.command_for(p, lang), *extra])
    if "RANK" not in os.environ or "WORLD_SIZE" not in os.environ:
        raise TPMathError("not_torchrun", command=cmd)
    try:
        rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
        local = int(os.environ.get("LOCAL_RANK", rank))
    except ValueError:
        raise TPMathError("bad_rank_env", rank=repr(os.environ["RANK"]),
                          world=repr(os.environ["WORLD_SIZE"])) from None
    if world != p["world"]:
        raise TPMathError("wrong_world", need=p["world"], got=world, command=cmd)
    return rank, world, local


def choose_backend(torch, requested: str, world: int) -> str:
    """gloo on CPU; nccl when asked for (or ``auto``) and there is one GPU per local rank."""
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if requested == "auto":
        return "nccl" if gpus >= local_world and torch.distributed.is_nccl_available() else "gloo"
    if requested == "nccl" and gpus < local_world:
        raise TPMathError("nccl_needs_gpus", "backend", ranks=local_world, gpus=gpus)
    return requested


@dataclass
class Ctx:
    """One rank's handle on the run."""

    torch: Any
    dist: Any
    rank: int
    world: int
    device: Any
    backend: str

    def tensor(self, a: Any):
        """A numpy array as a new tensor on this rank's device (a copy: the inputs may be a
        memoised core result shared with other callers)."""
        return self.torch.tensor(np.asarray(a), device=self.device)


def init(torch, backend: str, rank: int, world: int, local: int, timeout_s: float) -> Ctx:
    """Join the process group (torchrun's env:// rendezvous)."""
    dist = torch.distributed
    device = torch.device(f"cuda:{local}") if backend == "nccl" else torch.device("cpu")
    if backend == "nccl":
        torch.cuda.set_device(device)
    dist.init_process_group(backend, rank=rank, world_size=world,
                            timeout=datetime.timedelta(seconds=timeout_s))
    return Ctx(torch, dist, rank, world, device, backend)


def numpy(t: Any) -> np.ndarray:
    """A tensor as float64 numpy for printing and comparing (float16 widens exactly)."""
    return t.detach().to("cpu").double().numpy()


def say(lines: list[str]) -> None:
    """Write whole lines with one system call each: ranks share torchrun's stdout, and a
    pipe write of at most PIPE_BUF (4096) bytes is never mixed with another process's."""
    sys.stdout.flush()
    for line in lines:
        os.write(sys.stdout.fileno(), (line + "\n").encode("utf-8"))


def emit_in_rank_order(ctx: Ctx, lines: list[str]) -> None:
    """Every rank prints its own lines; barriers take turns so ranks do not interleave."""
    for r in range(ctx.world):
        if r == ctx.rank:
            say(lines)
        ctx.dist.barrier()


# ----------------------------------------------------------------- Megatron's operators
# f and f̄ (Korthikanti et al. 2022's letters; Megatron-LM §3 writes f̄ as g), in Megatron Core
# megatron/core/tensor_parallel/mappings.py: conjugate pairs.
# An autograd Function's backward receives dL/d(output) on this rank only, so the
# collective that makes the gradient whole must be written into the backward by hand.

def _functions(torch):
    dist = torch.distributed

    class CopyToTensorParallel(torch.autograd.Function):
        """f: identity forward; AllReduce(SUM) backward (every rank used the same input,
        each computed only its part of dL/dinput)."""

        @staticmethod
        def forward(ctx, x):
            return x.view_as(x)

        @staticmethod
        def backward(ctx, grad):
            grad = grad.clone()
            dist.all_reduce(grad)
            return grad

    class ReduceFromTensorParallel(torch.autograd.Function):
        """f̄: AllReduce(SUM) forward (each rank holds a partial sum); identity backward
        (the upstream gradient is already whole on every rank: summing it again would
        multiply it by tp)."""

        @staticmethod
        def forward(ctx, x):
            y = x.clone()
            dist.all_reduce(y)
            return y

        @staticmethod
        def backward(ctx, grad):
            return grad

    class GatherFromTensorParallel(torch.autograd.Function):
        """AllGather along the last dim forward; backward keeps this rank's slice."""

        @staticmethod
        def forward(ctx, x):
            world, rank = dist.get_world_size(), dist.get_rank()
            parts = [torch.empty_like(x) for _ in range(world)]
            dist.all_gather(parts, x.contiguous())
            ctx.rank, ctx.width = rank, x.shape[-1]
            return torch.cat(parts, dim=-1)

        @staticmethod
        def backward(ctx, grad):
            a = ctx.rank * ctx.width
            return grad[..., a:a + ctx.width].contiguous()

    return CopyToTensorParallel, ReduceFromTensorParallel, GatherFromTensorParallel


def operators(torch):
    """(f, f̄, gather) as functions of a tensor."""
    f, f_bar, gather = _functions(torch)
    return f.apply, f_bar.apply, gather.apply


def all_gather_cat(ctx: Ctx, t: Any, dim: int):
    """Every rank's ``t`` concatenated along ``dim`` (used to assemble shards for the check)."""
    parts = [ctx.torch.empty_like(t) for _ in range(ctx.world)]
    ctx.dist.all_gather(parts, t.contiguous())
    return ctx.torch.cat(parts, dim=dim)


def max_abs(a: Any, b: Any) -> float:
    """max |a − b| in float64."""
    return float(np.max(np.abs(numpy(a) - numpy(b)))) if a.numel() else 0.0


def flush_and_exit(code: int) -> None:
    """Leave without tearing the process group down (after a mismatch it may never return)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
