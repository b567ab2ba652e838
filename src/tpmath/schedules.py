"""Ring and tree schedules: who sends which chunk to whom, and the bytes that costs.

The logical collective (see ``collectives``) does not fix the bytes on the
wire; the algorithm does.  This module spells out two textbook schedules for
AllReduce and counts, per rank, the messages and bytes it sends and receives.

Letters:
    n           number of ranks
    count       elements per rank (the AllReduce buffer length)
    elem_bytes  bytes per element (4 for float32, 2 for bf16/fp16)
    S           count · elem_bytes, the buffer size in bytes
    c_k         elements in chunk k (ring only)

Ring (the schedule of NCCL's ring AllReduce, ``all_reduce.h`` ``runRing``, with
ring order 0 → 1 → … → n−1 → 0; real NCCL picks the ring order from the
topology, pipelines each chunk in slices and runs several channels in parallel,
which changes neither the chunk a rank forwards nor the total bytes):
    The buffer is cut into n chunks whose sizes differ by at most one element:
    the first ``count % n`` chunks have ⌈count/n⌉ elements, the rest ⌊count/n⌋
    (``numpy.array_split``'s rule, our stated choice).  NCCL instead gives each
    chunk ⌈count/n⌉ elements (rounded to its alignment, per loop of its chunk
    size) and the last chunks the remainder, which can be much shorter or empty;
    per-rank bytes then differ more, but with any split each chunk is forwarded
    n−1 times per phase, so the bytes summed over ranks are 2(n−1)·count·elem_bytes.
    ReduceScatter phase, step s = 0 … n−2: rank r sends chunk (r − 1 − s) mod n to
    rank r+1, which adds it into its own copy.  After n−1 steps rank r holds the
    fully reduced chunk r (NCCL's ReduceScatter layout).
    AllGather phase, step s = 0 … n−2: rank r sends chunk (r − s) mod n (complete)
    to rank r+1, which stores it.
    Per rank: 2(n−1) messages; bytes sent = (2·count − c_r − c_{(r+1) mod n})·elem_bytes,
    which is 2(n−1)/n · S when n divides count.

Tree (a single binary tree, not NCCL's pipelined double binary tree):
    heap order rooted at rank 0: parent(r) = (r−1)//2, children 2r+1 and 2r+2.
    Reduce phase: deepest level first, every non-root rank sends its whole
    partial sum (count elements) to its parent once it has its children's.
    Broadcast phase: top level first, every rank sends the whole result to each child.
    Per rank: sent = (1 if r ≠ 0) + children(r) messages of S bytes each;
    received = children(r) + (1 if r ≠ 0).  The busiest rank (two children and a
    parent) sends 3·S, and the time has 2·⌊log2 n⌋ sequential steps.  NCCL's double
    binary tree instead sends half the data down each of two complementary
    trees, pipelined, so a rank moves about S each way; this module does not model that.

Bus bandwidth (nccl-tests ``doc/PERFORMANCE.md``): busbw = algbw · factor, with
factor 2(n−1)/n for AllReduce, (n−1)/n for ReduceScatter, AllGather, AlltoAll
(and Gather/Scatter in nccl-tests' ``gather.cu``/``scatter.cu``), 1 for
Broadcast and Reduce.  It is the fraction of S a rank must move on the busiest
link under an optimal algorithm, which is why a ring reaches it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .collectives import BINARY_OPS, NAMES, OPS, REGISTRY, as_inputs
from .validate import as_choice, as_int

ALGORITHMS = ("ring", "tree")


def bus_bandwidth_factor(name: str, n: int) -> float:
    """nccl-tests' busbw / algbw factor for collective ``name`` on ``n`` ranks."""
    return REGISTRY[as_choice("name", name, NAMES)].bus_factor(as_int("n", n, 1))


def chunk_sizes(count: int, n: int) -> list[int]:
    """n chunk lengths summing to count; the first count % n are one element longer."""
    base, extra = divmod(count, n)
    return [base + (1 if k < extra else 0) for k in range(n)]


def chunk_bounds(count: int, n: int) -> list[tuple[int, int]]:
    """[start, stop) of each chunk, in order."""
    sizes = chunk_sizes(count, n)
    starts = np.concatenate([[0], np.cumsum(sizes)]).astype(int)
    return [(int(starts[k]), int(starts[k + 1])) for k in range(n)]


def _validate(n: Any, count: Any, elem_bytes: Any) -> tuple[int, int, int]:
    return as_int("ranks", n, 1, 256), as_int("count", count, 1), as_int("elem_bytes", elem_bytes, 1, 64)


# ---------------------------------------------------------------- results

@dataclass(frozen=True, eq=False)
class Transfer:
    """One message of a step: chunk ``chunk`` (``elements`` elements, ``bytes`` bytes) from src to dst."""
    src: int
    dst: int
    chunk: int
    elements: int
    bytes: int


@dataclass(frozen=True, eq=False)
class Step:
    """The messages sent at once in step ``step`` (``phase_step`` within its phase)."""
    step: int
    phase: str                  # reduce-scatter / all-gather (ring), reduce / broadcast (tree)
    phase_step: int
    transfers: list[Transfer]


@dataclass(frozen=True, eq=False)
class Chunk:
    """Elements [start, stop) of every rank's buffer, moved as one message."""
    chunk: int
    start: int
    stop: int
    elements: int


@dataclass(frozen=True, eq=False)
class RankTraffic:
    """What one rank sends and receives over the whole schedule (empty chunks are not sent)."""
    rank: int
    messages_sent: int
    messages_received: int
    bytes_sent: int
    bytes_received: int


@dataclass(frozen=True, eq=False)
class TreeNode:
    """A rank's place in the heap-ordered binary tree rooted at rank 0."""
    rank: int
    parent: int | None
    children: list[int]
    depth: int


@dataclass(frozen=True, eq=False)
class RingSchedule:
    """Ring AllReduce of ``count`` elements of ``elem_bytes`` bytes on n ranks."""
    algorithm: str                  # "ring"
    n: int
    count: int
    elem_bytes: int
    bytes: int                      # one rank's buffer
    chunks: list[Chunk]             # n chunks
    steps: list[Step]               # 2(n−1) steps
    per_rank: list[RankTraffic]
    closed_form_bytes_sent: float   # 2(n−1)/n · bytes, exact when n divides count
    bus_factor: float


@dataclass(frozen=True, eq=False)
class TreeSchedule:
    """Binary-tree AllReduce (reduce to rank 0, then broadcast) of one whole-buffer chunk."""
    algorithm: str                  # "tree"
    n: int
    count: int
    elem_bytes: int
    bytes: int
    chunks: list[Chunk]             # one chunk: the whole buffer
    tree: list[TreeNode]
    steps: list[Step]               # 2 · depth steps
    per_rank: list[RankTraffic]
    bus_factor: float


@dataclass(frozen=True, eq=False)
class Simulation:
    """A schedule run on real buffers: every rank's buffer after each step, and at the end."""
    schedule: RingSchedule | TreeSchedule
    steps: list[list[np.ndarray]]   # steps × n × (count,)
    outputs: list[np.ndarray]       # n × (the input's shape)


# ---------------------------------------------------------------- ring

def ring_steps(n: int, count: int, elem_bytes: int = 1) -> list[Step]:
    """The 2(n−1) steps of ring AllReduce, each a list of transfers."""
    sizes = chunk_sizes(count, n)
    steps = []
    for phase, offset in (("reduce-scatter", 1), ("all-gather", 0)):
        for s in range(n - 1):
            transfers = []
            for r in range(n):
                k = (r - offset - s) % n  # RS: chunk r−1−s, AG: chunk r−s
                transfers.append(Transfer(src=r, dst=(r + 1) % n, chunk=k, elements=sizes[k],
                                          bytes=sizes[k] * elem_bytes))
            steps.append(Step(step=len(steps), phase=phase, phase_step=s, transfers=transfers))
    return steps


def _per_rank(n: int, steps: list[Step]) -> list[RankTraffic]:
    """Messages and bytes sent / received per rank, summed over ``steps``."""
    count = {k: [0] * n for k in ("messages_sent", "messages_received", "bytes_sent", "bytes_received")}
    for step in steps:
        for t in step.transfers:
            if t.elements == 0:
                continue  # an empty chunk (count < n) is not sent
            count["messages_sent"][t.src] += 1
            count["bytes_sent"][t.src] += t.bytes
            count["messages_received"][t.dst] += 1
            count["bytes_received"][t.dst] += t.bytes
    return [RankTraffic(rank=r, **{k: v[r] for k, v in count.items()}) for r in range(n)]


def ring_all_reduce(n: int, count: int, elem_bytes: int = 4) -> RingSchedule:
    """Ring AllReduce schedule on n ranks and its per-rank traffic (see module docstring)."""
    n, count, elem_bytes = _validate(n, count, elem_bytes)
    steps = ring_steps(n, count, elem_bytes)
    size = count * elem_bytes
    return RingSchedule(
        algorithm="ring", n=n, count=count, elem_bytes=elem_bytes, bytes=size,
        chunks=[Chunk(chunk=k, start=a, stop=b, elements=b - a) for k, (a, b) in enumerate(chunk_bounds(count, n))],
        steps=steps, per_rank=_per_rank(n, steps),
        closed_form_bytes_sent=2.0 * (n - 1) / n * size,  # exact when n divides count
        bus_factor=bus_bandwidth_factor("all-reduce", n),
    )


def simulate_ring_all_reduce(inputs: Any, op: str = "sum") -> Simulation:
    """Execute the ring schedule on real per-rank buffers (1-D).

    Every rank keeps a working copy of its (flattened) buffer; in a
    ReduceScatter step the receiver combines the incoming chunk with its own
    copy, in an AllGather step it overwrites its copy.  The reduction order per
    chunk is the ring order, not rank order, so float sums may differ from
    ``collective("all-reduce")`` in the last bits (as NCCL's do).
    """
    op = as_choice("op", op, OPS)
    bufs = as_inputs(inputs)
    shape = bufs[0].shape
    bufs = [b.reshape(-1) for b in bufs]  # (count,) per rank: the contiguous buffer, C order
    n, count = len(bufs), bufs[0].size
    work = [b.astype(np.result_type(b.dtype, np.float64) if op == "avg" else b.dtype) for b in bufs]
    bounds = chunk_bounds(count, n)
    combine = BINARY_OPS[op]
    snapshots = []
    for step in ring_steps(n, count):
        sent = [(t, work[t.src][slice(*bounds[t.chunk])].copy()) for t in step.transfers]
        for t, payload in sent:  # all sends of a step happen "at once": read before writing
            sl = slice(*bounds[t.chunk])
            if step.phase == "reduce-scatter":
                work[t.dst][sl] = combine(payload, work[t.dst][sl])
            else:
                work[t.dst][sl] = payload
        snapshots.append([w.copy() for w in work])
    if op == "avg":
        work = [w / n for w in work]  # ncclAvg: divide the sum by n
    return Simulation(schedule=ring_all_reduce(n, count, bufs[0].itemsize), steps=snapshots,
                      outputs=[w.reshape(shape) for w in work])


# ---------------------------------------------------------------- tree
def tree_parent(r: int) -> int | None:
    """Parent of rank r in the heap-ordered binary tree rooted at 0."""
    return None if r == 0 else (r - 1) // 2


def tree_children(r: int, n: int) -> list[int]:
    """Children of rank r (2r+1, 2r+2 when they exist)."""
    return [c for c in (2 * r + 1, 2 * r + 2) if c < n]


def tree_depth(r: int) -> int:
    """Depth of rank r (root = 0): ⌊log2(r+1)⌋."""
    return (r + 1).bit_length() - 1


def tree_steps(n: int, count: int, elem_bytes: int = 1) -> list[Step]:
    """Reduce up the tree level by level, then broadcast down it."""
    max_depth = tree_depth(n - 1)
    size = count * elem_bytes
    steps = []
    for d in range(max_depth, 0, -1):  # reduce: ranks at depth d send to their parents
        transfers = [Transfer(src=r, dst=tree_parent(r), chunk=0, elements=count, bytes=size)
                     for r in range(n) if tree_depth(r) == d]
        steps.append(Step(step=len(steps), phase="reduce", phase_step=max_depth - d, transfers=transfers))
    for d in range(0, max_depth):  # broadcast: ranks at depth d send to their children
        transfers = [Transfer(src=r, dst=c, chunk=0, elements=count, bytes=size)
                     for r in range(n) if tree_depth(r) == d for c in tree_children(r, n)]
        steps.append(Step(step=len(steps), phase="broadcast", phase_step=d, transfers=transfers))
    return steps


def tree_all_reduce(n: int, count: int, elem_bytes: int = 4) -> TreeSchedule:
    """Binary-tree AllReduce (reduce to rank 0, then broadcast) and its per-rank traffic."""
    n, count, elem_bytes = _validate(n, count, elem_bytes)
    steps = tree_steps(n, count, elem_bytes)
    return TreeSchedule(
        algorithm="tree", n=n, count=count, elem_bytes=elem_bytes, bytes=count * elem_bytes,
        chunks=[Chunk(chunk=0, start=0, stop=count, elements=count)],
        tree=[TreeNode(rank=r, parent=tree_parent(r), children=tree_children(r, n), depth=tree_depth(r))
              for r in range(n)],
        steps=steps, per_rank=_per_rank(n, steps), bus_factor=bus_bandwidth_factor("all-reduce", n),
    )


def simulate_tree_all_reduce(inputs: Any, op: str = "sum") -> Simulation:
    """Execute the tree schedule on real per-rank buffers; same return shape as the ring."""
    op = as_choice("op", op, OPS)
    bufs = as_inputs(inputs)
    shape = bufs[0].shape
    bufs = [b.reshape(-1) for b in bufs]  # (count,) per rank
    n, count = len(bufs), bufs[0].size
    work = [b.astype(np.result_type(b.dtype, np.float64) if op == "avg" else b.dtype) for b in bufs]
    combine = BINARY_OPS[op]
    snapshots = []
    for step in tree_steps(n, count):
        sent = [(t, work[t.src].copy()) for t in step.transfers]
        for t, payload in sent:
            if step.phase == "reduce":
                work[t.dst] = combine(work[t.dst], payload)
            else:
                work[t.dst] = payload
        snapshots.append([w.copy() for w in work])
    if op == "avg":
        work = [w / n for w in work]
    return Simulation(schedule=tree_all_reduce(n, count, bufs[0].itemsize), steps=snapshots,
                      outputs=[w.reshape(shape) for w in work])


def all_reduce_schedule(n: int, count: int, elem_bytes: int = 4,
                        algorithm: str = "ring") -> RingSchedule | TreeSchedule:
    """``ring_all_reduce`` or ``tree_all_reduce`` by name."""
    algorithm = as_choice("algorithm", algorithm, ALGORITHMS)
    return (ring_all_reduce if algorithm == "ring" else tree_all_reduce)(n, count, elem_bytes)
