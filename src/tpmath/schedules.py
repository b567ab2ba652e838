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


def ring_steps(n: int, count: int) -> list[dict]:
    """The 2(n−1) steps of ring AllReduce, each a list of (src, dst, chunk, elements)."""
    sizes = chunk_sizes(count, n)
    steps = []
    for phase, offset in (("reduce-scatter", 1), ("all-gather", 0)):
        for s in range(n - 1):
            transfers = []
            for r in range(n):
                k = (r - offset - s) % n  # RS: chunk r−1−s, AG: chunk r−s
                transfers.append({"src": r, "dst": (r + 1) % n, "chunk": k, "elements": sizes[k]})
            steps.append({"step": len(steps), "phase": phase, "phase_step": s, "transfers": transfers})
    return steps


def _per_rank(n: int, steps: list[dict], elem_bytes: int) -> list[dict]:
    """Messages and bytes sent / received per rank, summed over ``steps``."""
    rows = [{"rank": r, "messages_sent": 0, "messages_received": 0, "bytes_sent": 0, "bytes_received": 0}
            for r in range(n)]
    for step in steps:
        for t in step["transfers"]:
            if t["elements"] == 0:
                continue  # an empty chunk (count < n) is not sent
            nbytes = t["elements"] * elem_bytes
            rows[t["src"]]["messages_sent"] += 1
            rows[t["src"]]["bytes_sent"] += nbytes
            rows[t["dst"]]["messages_received"] += 1
            rows[t["dst"]]["bytes_received"] += nbytes
    return rows


def _with_bytes(steps: list[dict], elem_bytes: int) -> list[dict]:
    for step in steps:
        for t in step["transfers"]:
            t["bytes"] = t["elements"] * elem_bytes
    return steps


def ring_all_reduce(n: int, count: int, elem_bytes: int = 4) -> dict:
    """Ring AllReduce schedule on n ranks and its per-rank traffic (see module docstring)."""
    n, count, elem_bytes = _validate(n, count, elem_bytes)
    steps = _with_bytes(ring_steps(n, count), elem_bytes)
    size = count * elem_bytes
    return {
        "algorithm": "ring", "n": n, "count": count, "elem_bytes": elem_bytes, "bytes": size,
        "chunks": [{"chunk": k, "start": a, "stop": b, "elements": b - a}
                   for k, (a, b) in enumerate(chunk_bounds(count, n))],
        "steps": steps,
        "per_rank": _per_rank(n, steps, elem_bytes),
        "closed_form_bytes_sent": 2.0 * (n - 1) / n * size,  # exact when n divides count
        "bus_factor": bus_bandwidth_factor("all-reduce", n),
    }


def simulate_ring_all_reduce(inputs: Any, op: str = "sum") -> dict:
    """Execute the ring schedule on real per-rank buffers (1-D).

    Every rank keeps a working copy of its (flattened) buffer; in a
    ReduceScatter step the receiver combines the incoming chunk with its own
    copy, in an AllGather step it overwrites its copy.  The reduction order per
    chunk is the ring order, not rank order, so float sums may differ from
    ``collective("all-reduce")`` in the last bits (as NCCL's do).
    Returns ``{"schedule", "steps": [[buffer per rank] after each step], "outputs"}``.
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
        sent = [(t, work[t["src"]][slice(*bounds[t["chunk"]])].copy()) for t in step["transfers"]]
        for t, payload in sent:  # all sends of a step happen "at once": read before writing
            sl = slice(*bounds[t["chunk"]])
            if step["phase"] == "reduce-scatter":
                work[t["dst"]][sl] = combine(payload, work[t["dst"]][sl])
            else:
                work[t["dst"]][sl] = payload
        snapshots.append([w.copy() for w in work])
    if op == "avg":
        work = [w / n for w in work]  # ncclAvg: divide the sum by n
    return {"schedule": ring_all_reduce(n, count, bufs[0].itemsize), "steps": snapshots,
            "outputs": [w.reshape(shape) for w in work]}


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


def tree_steps(n: int, count: int) -> list[dict]:
    """Reduce up the tree level by level, then broadcast down it."""
    max_depth = tree_depth(n - 1)
    steps = []
    for d in range(max_depth, 0, -1):  # reduce: ranks at depth d send to their parents
        transfers = [{"src": r, "dst": tree_parent(r), "chunk": 0, "elements": count}
                     for r in range(n) if tree_depth(r) == d]
        steps.append({"step": len(steps), "phase": "reduce", "phase_step": max_depth - d,
                      "transfers": transfers})
    for d in range(0, max_depth):  # broadcast: ranks at depth d send to their children
        transfers = [{"src": r, "dst": c, "chunk": 0, "elements": count}
                     for r in range(n) if tree_depth(r) == d for c in tree_children(r, n)]
        steps.append({"step": len(steps), "phase": "broadcast", "phase_step": d, "transfers": transfers})
    return steps


def tree_all_reduce(n: int, count: int, elem_bytes: int = 4) -> dict:
    """Binary-tree AllReduce (reduce to rank 0, then broadcast) and its per-rank traffic."""
    n, count, elem_bytes = _validate(n, count, elem_bytes)
    steps = _with_bytes(tree_steps(n, count), elem_bytes)
    return {
        "algorithm": "tree", "n": n, "count": count, "elem_bytes": elem_bytes, "bytes": count * elem_bytes,
        "chunks": [{"chunk": 0, "start": 0, "stop": count, "elements": count}],
        "tree": [{"rank": r, "parent": tree_parent(r), "children": tree_children(r, n), "depth": tree_depth(r)}
                 for r in range(n)],
        "steps": steps,
        "per_rank": _per_rank(n, steps, elem_bytes),
        "bus_factor": bus_bandwidth_factor("all-reduce", n),
    }


def simulate_tree_all_reduce(inputs: Any, op: str = "sum") -> dict:
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
        sent = [(t, work[t["src"]].copy()) for t in step["transfers"]]
        for t, payload in sent:
            if step["phase"] == "reduce":
                work[t["dst"]] = combine(work[t["dst"]], payload)
            else:
                work[t["dst"]] = payload
        snapshots.append([w.copy() for w in work])
    if op == "avg":
        work = [w / n for w in work]
    return {"schedule": tree_all_reduce(n, count, bufs[0].itemsize), "steps": snapshots,
            "outputs": [w.reshape(shape) for w in work]}


def all_reduce_schedule(n: int, count: int, elem_bytes: int = 4, algorithm: str = "ring") -> dict:
    """``ring_all_reduce`` or ``tree_all_reduce`` by name."""
    algorithm = as_choice("algorithm", algorithm, ALGORITHMS)
    return (ring_all_reduce if algorithm == "ring" else tree_all_reduce)(n, count, elem_bytes)
