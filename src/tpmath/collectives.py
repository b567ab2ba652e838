"""Collective operations over one buffer per rank, with NCCL's data layouts.

Letters:
    n      number of ranks in the group (``len(inputs)``)
    r, i   a rank index, 0 … n−1
    count  elements in each rank's input buffer (every rank has the same shape and dtype)
    root   the rank that sends (broadcast, scatter) or receives (reduce, gather)

Layouts (NCCL "Collective Operations"):
    AllReduce      every rank gets op(x_0, …, x_{n−1})                       (count)
    Reduce         only ``root`` gets op(x_0, …, x_{n−1}); others get None    (count)
    Broadcast      every rank gets x_root                                    (count)
    AllGather      every rank gets [x_0 | x_1 | … | x_{n−1}]: rank i at offset i·count   (n·count)
    ReduceScatter  rank i gets block i of op(x_0, …, x_{n−1}); n must divide count        (count/n)
    AlltoAll       rank j gets [x_0[block j] | … | x_{n−1}[block j]]: block j of rank i's
                   input goes to rank j and lands at block i                 (count)
    Gather         only ``root`` gets [x_0 | … | x_{n−1}]; others get None  (n·count)
    Scatter        rank i gets block i of x_root; n must divide count        (count/n)

A rank's buffer is 1-D (the NCCL case: a pointer and a count).  A 2-D buffer
(rows × cols) is the same contiguous memory in C order; blocks are then whole
rows (as ``torch.distributed``'s ``*_tensor`` collectives split dim 0), so a
block split needs n to divide the number of rows.

Reductions run in rank order (x_0 op x_1 op …).  ``avg`` is NCCL's ``ncclAvg``:
the sum divided by n.  Nothing here models time or bytes: see ``schedules``.
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from functools import reduce as _fold
from typing import Any, Callable, Sequence

import numpy as np

from . import fmt
from .errors import TPMathError
from .errors import name as field_name
from .i18n import Text
from .validate import as_array, as_choice, as_int, check_finite, parse_json

OPS = ("sum", "avg", "max", "min", "prod")

BINARY_OPS = {"sum": np.add, "avg": np.add, "max": np.maximum, "min": np.minimum, "prod": np.multiply}


def as_inputs(value: Any, name: str = "inputs") -> list[np.ndarray]:
    """Validate per-rank buffers: a list (one per rank) of equal-shape, equal-dtype arrays.

    Accepts a list of arrays / nested lists, a 2-D or 3-D array whose first axis
    is the rank, or a JSON string of either.  numpy arrays keep their dtype
    (float or integer); nested lists become float64.
    """
    value = parse_json(name, value)
    if isinstance(value, np.ndarray):
        if value.ndim < 2:
            raise TPMathError("buffers_no_rank_axis", name, name=field_name(name), shape=fmt.shape(value.shape))
        value = list(value)
    if not isinstance(value, (list, tuple)) or len(value) == 0:
        raise TPMathError("buffers_not_a_list", name, name=field_name(name), value=value)
    bufs = [_as_buffer(r, v, name) for r, v in enumerate(value)]
    ref = bufs[0]
    for r, b in enumerate(bufs[1:], start=1):
        if b.shape != ref.shape:
            raise TPMathError("buffers_shape_differs", name, rank=r, shape=fmt.shape(b.shape),
                              shape0=fmt.shape(ref.shape))
        if b.dtype != ref.dtype:
            raise TPMathError("buffers_dtype_differs", name, rank=r, dtype=b.dtype.name, dtype0=ref.dtype.name)
    return bufs


def _as_buffer(r: int, value: Any, field: str) -> np.ndarray:
    """Rank r's buffer: 1-D or 2-D, numeric, finite, non-empty (errors name the rank)."""
    label = Text("name.rank_buffer", rank=str(r))
    if isinstance(value, np.ndarray) and value.dtype.kind in "iuf":
        if value.ndim not in (1, 2) or value.size == 0:
            raise TPMathError("wrong_ndim", field, name=label, want="1-D/2-D", shape=fmt.shape(value.shape))
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            raise TPMathError("not_finite_entry", field, name=label, value=value[~np.isfinite(value)][0])
        return value.copy()
    return as_array(field, value, ndim=(1, 2), label=label)


def _split(buf: np.ndarray, n: int, what: str) -> list[np.ndarray]:
    """n equal blocks along axis 0 (elements for 1-D, rows for 2-D); n must divide."""
    rows = buf.shape[0]
    if rows % n != 0:
        code = "blocks_uneven_elements" if buf.ndim == 1 else "blocks_uneven_rows"
        raise TPMathError(code, "inputs", collective=REGISTRY[what].nccl, count=rows, n=n, rest=rows % n)
    return np.split(buf, n, axis=0)


def reduce_all(bufs: Sequence[np.ndarray], op: str) -> np.ndarray:
    """op(x_0, …, x_{n−1}) elementwise, folded in rank order; avg = sum / n (ncclAvg)."""
    out = _fold(BINARY_OPS[op], [np.asarray(b) for b in bufs])
    out = np.array(out, copy=True)
    if op == "avg":
        out = out / len(bufs)  # ncclAvg: sum, then divide by the number of ranks
    return out


def example_inputs(n: Any) -> list[np.ndarray]:
    """The site's buffers: rank r holds 10^r·[1, 2, …, L] (the seed's R0, R1 for n = 2).

    L = 4 when n divides 4, else 6 for n = 3, else 2n (n = 5…8), so every block split
    (ReduceScatter, AlltoAll, Scatter) is even.
    """
    n = as_int("ranks", n, 1, 64)
    length = 4 if 4 % n == 0 else 6 if 6 % n == 0 else 2 * n
    base = np.arange(1, length + 1, dtype=np.float64)    # (L,)
    return [base * 10.0 ** r for r in range(n)]          # n × (L,)


def collective(name: str, inputs: Any, op: str = "sum", root: int = 0) -> list[np.ndarray | None]:
    """Run collective ``name`` on per-rank ``inputs``; return one output per rank (None = nothing).

    >>> collective("all-to-all", [np.array([1., 2, 3, 4]), np.array([10., 20, 30, 40])])
    [array([ 1.,  2., 10., 20.]), array([ 3.,  4., 30., 40.])]
    """
    spec = REGISTRY[as_choice("name", name, NAMES)]
    op = as_choice("op", op, OPS)
    bufs = as_inputs(inputs)
    n = len(bufs)
    root = as_int("root", root, 0, n - 1 if spec.root else None)
    if op == "avg" and bufs[0].dtype.kind in "iu" and spec.reduces:
        raise TPMathError("avg_on_integers", "op", dtype=bufs[0].dtype.name)
    with np.errstate(over="ignore", invalid="ignore"):   # reported just below, as an error
        outputs = spec.simulate(bufs, op, root)
    # A reduction of finite inputs can still overflow (1e308 + 1e308): never hand back inf/NaN.
    check_finite(bufs[0].dtype.name, {f"outputs[{r}]": o for r, o in enumerate(outputs)}, field="inputs")
    return outputs


# ------------------------------------------------------------------- simulation, per rank
# Each takes the validated buffers (n × (count,)), the op and the root, and returns what every
# rank holds afterwards, computed rank by rank as the collective moves the data.

def _all_reduce(bufs, op, root):
    total = reduce_all(bufs, op)                        # (count,) on every rank
    return [total.copy() for _ in bufs]


def _reduce(bufs, op, root):
    total = reduce_all(bufs, op)                        # (count,) on root only
    return [total if r == root else None for r in range(len(bufs))]


def _broadcast(bufs, op, root):
    return [bufs[root].copy() for _ in bufs]            # (count,) = x_root everywhere


def _all_gather(bufs, op, root):
    whole = np.concatenate(bufs, axis=0)                # (n·count,): rank i at offset i·count
    return [whole.copy() for _ in bufs]


def _reduce_scatter(bufs, op, root):
    n = len(bufs)
    blocks = _split(reduce_all(bufs, op), n, "reduce-scatter")   # n × (count/n,)
    return [blocks[i].copy() for i in range(n)]         # rank i keeps block i


def _all_to_all(bufs, op, root):
    n = len(bufs)
    sent = [_split(b, n, "all-to-all") for b in bufs]   # sent[i][j]: block j of rank i, goes to rank j
    return [np.concatenate([sent[i][j] for i in range(n)], axis=0)  # (count,): from rank i at block i
            for j in range(n)]


def _gather(bufs, op, root):
    whole = np.concatenate(bufs, axis=0)                # (n·count,) on root only
    return [whole if r == root else None for r in range(len(bufs))]


def _scatter(bufs, op, root):
    blocks = _split(bufs[root], len(bufs), "scatter")   # root's buffer in n blocks
    return [b.copy() for b in blocks]                   # (count/n,): block i to rank i


# --------------------------------------------------------- reference, from the stacked inputs
# What each rank must hold, written as one formula on the stacked inputs S (n, L) and the
# reduced vector red = op(S) (L,), independently of the per-rank loops above (tests and the
# real-ranks check compare the two).

def _blocks(S: np.ndarray) -> np.ndarray:
    n, L = S.shape
    return S.reshape(n, n, L // n)                      # [source rank, block]


# ------------------------------------------------------------------- on real ranks (torch)
# Each takes a handle with ``torch``, ``dist``, ``world``, ``rank``, this rank's 1-D tensor x, the
# torch reduce op and the root, and returns what this rank receives (None: nothing).  Called only
# by tpmath.real (torch is never imported here: the handle carries it).

def _torch_in_place(call: str, **root_arg: str):
    def run(ctx, x, red, root):
        y = x.clone()
        kwargs = {k: root for k in root_arg.values()}
        getattr(ctx.dist, call)(y, **kwargs, **({"op": red} if red is not None else {}))
        return None if "dst" in kwargs and ctx.rank != root else y   # reduce: others' buffers unspecified
    return run


def _torch_all_gather(ctx, x, red, root):
    y = ctx.torch.empty(ctx.world * x.numel(), dtype=x.dtype, device=x.device)   # (n·L,) rank-ordered
    ctx.dist.all_gather_into_tensor(y, x)
    return y


def _torch_reduce_scatter(ctx, x, red, root):
    y = ctx.torch.empty(x.numel() // ctx.world, dtype=x.dtype, device=x.device)  # (L/n,) block r of op(x)
    ctx.dist.reduce_scatter_tensor(y, x.clone(), op=red)
    return y


def _torch_all_to_all(ctx, x, red, root):
    y = ctx.torch.empty_like(x)                         # block j from rank j
    ctx.dist.all_to_all_single(y, x)
    return y


def _torch_gather(ctx, x, red, root):
    parts = [ctx.torch.empty_like(x) for _ in range(ctx.world)] if ctx.rank == root else None
    ctx.dist.gather(x, parts, dst=root)
    return ctx.torch.cat(parts) if ctx.rank == root else None


def _torch_scatter(ctx, x, red, root):
    y = ctx.torch.empty(x.numel() // ctx.world, dtype=x.dtype, device=x.device)  # block r of root's x
    ctx.dist.scatter(y, list(x.chunk(ctx.world)) if ctx.rank == root else None, src=root)
    return y


# ------------------------------------------------------------------------------ the registry

def _all_ranks_move_twice(n: int) -> float:
    return 2.0 * (n - 1) / n


def _all_ranks_move_once(n: int) -> float:
    return (n - 1) / n


def _one_copy(n: int) -> float:
    return 1.0


@dataclass(frozen=True)
class Collective:
    """Everything the project knows about one collective; every other table derives from here.

    Adding a collective is one record below plus its strings (``opt.collective.<key>`` and
    ``note.coll_<key>`` in content/i18n; see ARCHITECTURE.md).  ``splits_input`` and
    ``reads_root_input_only`` are keyword-only (the figure draws the blocks and the unread inputs from
    them; tests/test_collectives.py checks them against ``simulate``).
    """

    name: str                                  # the CLI's and the page's name: "all-reduce"
    nccl: str                                  # NCCL's spelling, for tables: "AllReduce"
    reduces: bool                              # applies the reduction op
    root: str | None                           # torch's name of the root argument ("src", "dst") or None
    bus_factor: Callable[[int], float]         # nccl-tests' busbw / algbw on n ranks (doc/PERFORMANCE.md)
    simulate: Callable                         # (bufs, op, root) -> per-rank outputs
    reference: Callable                        # (S (n, L), red (L,), root) -> per-rank outputs
    torch_call: str                            # the torch.distributed function a rank calls
    run_torch: Callable                        # (ctx, x, torch op, root) -> this rank's output
    _: KW_ONLY
    splits_input: bool                         # each rank's input is cut into one block per rank
    reads_root_input_only: bool                # only the root's input is read (others' are ignored)

    @property
    def key(self) -> str:
        """The name in i18n keys and identifiers: all_reduce."""
        return self.name.replace("-", "_")

    @property
    def option_key(self) -> str:
        return f"opt.collective.{self.key}"

    @property
    def note_key(self) -> str:
        return f"note.coll_{self.key}"


REGISTRY: dict[str, Collective] = {c.name: c for c in (
    Collective("all-reduce", "AllReduce", True, None, _all_ranks_move_twice, _all_reduce,
               lambda S, red, root: [red] * len(S), "all_reduce", _torch_in_place("all_reduce"),
               splits_input=False, reads_root_input_only=False),
    Collective("reduce", "Reduce", True, "dst", _one_copy, _reduce,
               lambda S, red, root: [red if r == root else None for r in range(len(S))],
               "reduce", _torch_in_place("reduce", root="dst"),
               splits_input=False, reads_root_input_only=False),
    Collective("broadcast", "Broadcast", False, "src", _one_copy, _broadcast,
               lambda S, red, root: [S[root]] * len(S), "broadcast", _torch_in_place("broadcast", root="src"),
               splits_input=False, reads_root_input_only=True),
    Collective("all-gather", "AllGather", False, None, _all_ranks_move_once, _all_gather,
               lambda S, red, root: [S.reshape(-1)] * len(S), "all_gather_into_tensor", _torch_all_gather,
               splits_input=False, reads_root_input_only=False),
    Collective("reduce-scatter", "ReduceScatter", True, None, _all_ranks_move_once, _reduce_scatter,
               lambda S, red, root: list(red.reshape(len(S), -1)), "reduce_scatter_tensor", _torch_reduce_scatter,
               splits_input=True, reads_root_input_only=False),
    Collective("all-to-all", "AlltoAll", False, None, _all_ranks_move_once, _all_to_all,
               lambda S, red, root: [_blocks(S)[:, r].reshape(-1) for r in range(len(S))], "all_to_all_single",
               _torch_all_to_all,
               splits_input=True, reads_root_input_only=False),
    Collective("gather", "Gather", False, "dst", _all_ranks_move_once, _gather,
               lambda S, red, root: [S.reshape(-1) if r == root else None for r in range(len(S))], "gather",
               _torch_gather,
               splits_input=False, reads_root_input_only=False),
    Collective("scatter", "Scatter", False, "src", _all_ranks_move_once, _scatter,
               lambda S, red, root: list(S[root].reshape(len(S), -1)), "scatter", _torch_scatter,
               splits_input=True, reads_root_input_only=True),
)}

NAMES = tuple(REGISTRY)
# the collectives that take a root (the help of --root lists them)
ROOTED = tuple(name for name, c in REGISTRY.items() if c.root)
# NCCL's own spelling, for tables and explanations.
NCCL_NAMES = {name: c.nccl for name, c in REGISTRY.items()}


@dataclass(frozen=True, eq=False)
class CollectiveResult:
    """One collective run on per-rank buffers: what was asked, then what every rank holds."""
    name: str                            # ours (``all-reduce``)
    nccl_name: str                       # NCCL's (``AllReduce``)
    op: str
    root: int
    # whether op / root had any effect, so a table need not show an op for a broadcast or a
    # root for an all-reduce
    uses_op: bool
    uses_root: bool
    n: int                               # ranks
    inputs: list[np.ndarray]             # n × (count,)
    outputs: list[np.ndarray | None]     # n × (what the rank receives), None = nothing


def run_collective(name: str, inputs: Any, op: str = "sum", root: int = 0) -> CollectiveResult:
    """``collective`` plus its echo (:class:`CollectiveResult`)."""
    outputs = collective(name, inputs, op, root)
    spec = REGISTRY[name]
    bufs = as_inputs(inputs)
    return CollectiveResult(name=name, nccl_name=spec.nccl, op=op, root=as_int("root", root, 0),
                            uses_op=spec.reduces, uses_root=spec.root is not None, n=len(bufs), inputs=bufs,
                            outputs=outputs)
