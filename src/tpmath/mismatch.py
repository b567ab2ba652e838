"""Collective mismatch checker: which rank waits forever, at which call, and why.

Every rank of a group must call the same collectives, in the same order, with
the same count (shape) and dtype, on the same group; otherwise NCCL's
behaviour is undefined ("hangs, crashes, or data corruption", NCCL
"Collective Operations").  This module replays per-rank call sequences the way
blocking collectives (``torch.distributed`` without ``async_op``) execute:

Letters / model:
    n        number of ranks (``len(calls)``)
    calls[r] rank r's call sequence; each call is {"name", "shape", "dtype", "group"}
             (``group`` a list of ranks, default all n ranks; order inside it does not matter)
    pc[r]    index of the call rank r is blocked in (== len(calls[r]) once it has exited)

    A call on group G can complete only when every member of G is blocked in a
    call on G: calls on one communicator are matched by position (the k-th call
    on G of rank a meets the k-th call on G of rank b), never by name.  If the
    met calls disagree in name, shape or dtype, the members are stuck there (we
    report them; a real run may hang, crash or silently corrupt).  When nothing
    can advance, every rank that has not exited waits forever; the reason is
    taken from the first member of its group that is not there:
        early_exit      that member already returned from its last call
        order           that member is blocked in a call on another group and calls G only later
                        (a cycle of such waits is a deadlock)
        group_mismatch  that member never calls a collective on G
        blocked_peer    that member is stuck in a mismatch of its own
    and at a meeting with different arguments:
        order           names differ and the other rank's collective comes later in this rank's list
        name_mismatch   names differ otherwise
        shape_mismatch  same name, different element counts (NCCL sees counts, so shapes
                        (2, 2) and (4,) agree)
        dtype_mismatch  same name and shape, different dtypes
        not_in_group    the rank calls a collective on a group that does not contain it
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .collectives import NAMES, NCCL_NAMES
from .errors import TPMathError
from .i18n import Text
from .validate import parse_json

CALL_NAMES = NAMES + ("barrier",)
DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool")


# -------------------------------------------------------------------- results

@dataclass(frozen=True, eq=False)
class Hang:
    """A rank that never finishes: where it stops, why (``code``, see the module docstring) and
    the rank it waits for or disagrees with."""
    rank: int
    call_index: int
    call: Text | None                # the call, as a translation cell
    code: str
    peer: int | None
    message: Text                    # the whole sentence


@dataclass(frozen=True, eq=False)
class Completed:
    """A collective every member of its group reached with matching arguments."""
    name: str
    group: list[int]
    call_index: dict[str, int]       # rank (as a JSON key) → its call's index


@dataclass(frozen=True, eq=False)
class MismatchResult:
    """The replay of per-rank call sequences."""
    ok: bool                         # no rank hangs
    n: int                           # ranks
    matched: int                     # collectives completed
    completed: list[Completed]       # in the order they complete
    exited: list[int]                # ranks that returned from their last call
    hangs: list[Hang]                # in rank order


def _err(code: str, **args: Any) -> TPMathError:
    return TPMathError(code, "calls", **args)


def _ints(values: Any) -> str:
    """[0, 1]: a list of small integers as the messages quote it."""
    return "[" + ", ".join(str(v) for v in values) + "]"


def _validate_call(r: int, i: int, call: Any, n: int) -> dict:
    """One call dict, normalised: name, shape (tuple of ints), dtype, group (sorted tuple)."""
    where = f"calls[{r}][{i}]"
    if not isinstance(call, dict):
        raise _err("call_not_object", where=where, value=call)
    name = call.get("name")
    if name not in CALL_NAMES:
        raise _err("call_unknown_name", where=where, value=repr(name), choices=", ".join(CALL_NAMES))
    shape = call.get("shape", [])
    if not isinstance(shape, (list, tuple)) or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
        raise _err("call_bad_shape", where=where, value=shape)
    dtype = call.get("dtype", "float32")
    if dtype not in DTYPES:
        raise _err("call_unknown_dtype", where=where, value=repr(dtype), choices=", ".join(DTYPES))
    group = call.get("group", list(range(n)))
    if (not isinstance(group, (list, tuple)) or not group
            or not all(isinstance(g, int) and not isinstance(g, bool) and 0 <= g < n for g in group)
            or len(set(group)) != len(group)):
        raise _err("call_bad_group", where=where, value=group, last=n - 1)
    return {"name": name, "shape": tuple(shape), "dtype": dtype, "group": tuple(sorted(group))}


def validate_calls(calls: Any) -> list[list[dict]]:
    """Per-rank call lists (JSON string or Python lists), validated and normalised."""
    calls = parse_json("calls", calls)
    if not isinstance(calls, (list, tuple)) or not calls or not all(isinstance(c, (list, tuple)) for c in calls):
        raise _err("calls_not_a_list", value=calls)
    n = len(calls)
    return [[_validate_call(r, i, c, n) for i, c in enumerate(seq)] for r, seq in enumerate(calls)]


def _nccl(name: str) -> str:
    return NCCL_NAMES.get(name, "Barrier")


def _describe(call: dict) -> Text:
    """e.g. AllReduce(shape [4], float32, group [0, 1])."""
    return Text("hang.call", name=_nccl(call["name"]), shape=_ints(call["shape"]), dtype=call["dtype"],
                group=_ints(call["group"]))


def _hang(r: int, i: int, call: dict | None, code: str, reason: Text, peer: int | None,
          stuck: bool = False) -> Hang:
    """A rank that never finishes: it waits forever, or (``stuck``) met a call that disagrees,
    which NCCL leaves undefined.  ``message`` is the sentence, ``reason`` its second half."""
    message = Text("hang.stuck" if stuck else "hang.waits", rank=str(r), index=str(i), call=_describe(call),
                   reason=reason)
    return Hang(rank=r, call_index=i, call=None if call is None else _describe(call), code=code, peer=peer,
                message=message)


def _count(call: dict) -> int:
    """Elements in the buffer: NCCL sees a pointer and a count, not a shape."""
    total = 1
    for s in call["shape"]:
        total *= s
    return total


def _meeting_problem(r: int, members: tuple, seqs: list[list[dict]], pc: list[int]) -> Hang | None:
    """Compare rank r's current call with the other members'; None if they all agree."""
    mine = seqs[r][pc[r]]
    i = pc[r]
    for g in members:
        if g == r:
            continue
        other = seqs[g][pc[g]]
        j = pc[g]
        if other["name"] != mine["name"]:
            later = any(c["name"] == other["name"] and c["group"] == mine["group"] for c in seqs[r][i + 1:])
            met = dict(rank=str(r), peer=str(g), peer_index=str(j), peer_call=_describe(other))
            reason = (Text("hang.reason_met_later", other=_nccl(other["name"]), **met) if later
                      else Text("hang.reason_met_other_name", **met))
            return _hang(r, i, mine, "order" if later else "name_mismatch", reason, g, stuck=True)
        if _count(other) != _count(mine):
            reason = Text("hang.reason_shape", peer=str(g), peer_shape=_ints(other["shape"]),
                          peer_count=str(_count(other)), count=str(_count(mine)), name=_nccl(mine["name"]))
            return _hang(r, i, mine, "shape_mismatch", reason, g, stuck=True)
        if other["dtype"] != mine["dtype"]:
            reason = Text("hang.reason_dtype", peer=str(g), peer_dtype=other["dtype"], name=_nccl(mine["name"]))
            return _hang(r, i, mine, "dtype_mismatch", reason, g, stuck=True)
    return None


def _wait_reason(r: int, seqs: list[list[dict]], pc: list[int], stuck: set[int]) -> Hang:
    """Why rank r (blocked, its group not all present) can never proceed."""
    i = pc[r]
    mine = seqs[r][i]
    for g in mine["group"]:
        if g == r:
            continue
        if pc[g] >= len(seqs[g]):
            reason = Text("hang.reason_early_exit", peer=str(g), calls=str(len(seqs[g])))
            return _hang(r, i, mine, "early_exit", reason, g)
        other = seqs[g][pc[g]]
        if other["group"] == mine["group"]:
            continue  # g is here; some other member is missing
        peer = dict(peer=str(g), peer_index=str(pc[g]), peer_call=_describe(other))
        if g in stuck:
            return _hang(r, i, mine, "blocked_peer", Text("hang.reason_blocked_peer", **peer), g)
        group = _ints(mine["group"])
        if any(c["group"] == mine["group"] for c in seqs[g][pc[g] + 1:]):
            return _hang(r, i, mine, "order", Text("hang.reason_group_order", group=group, **peer), g)
        return _hang(r, i, mine, "group_mismatch", Text("hang.reason_group_mismatch", group=group, **peer), g)
    return _hang(r, i, mine, "blocked_peer", Text("hang.reason_never_assembles"), None)


def check_calls(calls: Any) -> MismatchResult:
    """Replay per-rank call sequences; report completed collectives and every rank that hangs."""
    seqs = validate_calls(calls)
    n = len(seqs)
    pc = [0] * n
    completed: list[Completed] = []
    problems: dict[int, Hang] = {}  # rank -> hang entry from a bad meeting (stuck for good)
    progress = True
    while progress:
        progress = False
        for r in range(n):
            if r in problems or pc[r] >= len(seqs[r]):
                continue
            call = seqs[r][pc[r]]
            members = call["group"]
            if r not in members:
                problems[r] = _hang(r, pc[r], call, "not_in_group", Text("hang.reason_not_in_group"), None)
                continue
            present = all(g not in problems and pc[g] < len(seqs[g]) and seqs[g][pc[g]]["group"] == members
                          for g in members)
            if not present:
                continue
            bad = {g: _meeting_problem(g, members, seqs, pc) for g in members}
            if any(bad.values()):
                for g in members:  # equality is transitive: if one member disagrees, every member does
                    problems[g] = bad[g]
                continue
            completed.append(Completed(name=call["name"], group=list(members),
                                       call_index={str(g): pc[g] for g in members}))
            for g in members:
                pc[g] += 1
            progress = True
    stuck = set(problems)
    hangs = []
    for r in range(n):
        if r in problems:
            hangs.append(problems[r])
        elif pc[r] < len(seqs[r]):
            hangs.append(_wait_reason(r, seqs, pc, stuck))
    return MismatchResult(ok=not hangs, n=n, matched=len(completed), completed=completed,
                          exited=[r for r in range(n) if pc[r] >= len(seqs[r])], hangs=hangs)


def _c(name: str, shape=(4,), dtype: str = "float32", group=(0, 1)) -> dict:
    return {"name": name, "shape": list(shape), "dtype": dtype, "group": list(group)}


# Named examples (the page's select); 2 ranks unless the story needs 4.
SCENARIOS: dict[str, list[list[dict]]] = {
    # column→row MLP, forward g then backward f, both ranks agree
    "ok": [[_c("all-reduce", (2, 2)), _c("all-reduce", (2, 2))],
           [_c("all-reduce", (2, 2)), _c("all-reduce", (2, 2))]],
    # same two collectives, issued in a different order on rank 1
    "order_swapped": [[_c("all-reduce"), _c("all-gather")],
                      [_c("all-gather"), _c("all-reduce")]],
    # rank 1 returns early (e.g. an `if loss is None: return` on one rank)
    "early_exit": [[_c("all-reduce"), _c("all-reduce")],
                   [_c("all-reduce")]],
    # rank 1 passes a differently shaped buffer (e.g. the last, shorter batch)
    "shape_mismatch": [[_c("all-reduce", (4,))],
                       [_c("all-reduce", (3,))]],
    # rank 1 runs its buffer in float16, rank 0 in float32
    "dtype_mismatch": [[_c("all-reduce", (4,), "float32")],
                       [_c("all-reduce", (4,), "float16")]],
    # 3 ranks: rank 2 built the group [0, 2] while ranks 0 and 1 use [0, 1, 2]
    "group_mismatch": [[_c("all-reduce", group=(0, 1, 2))],
                       [_c("all-reduce", group=(0, 1, 2))],
                       [_c("all-reduce", group=(0, 2))]],
    # 4 ranks, TP groups {0,1},{2,3}, DP groups {0,2},{1,3}: each rank starts with a
    # different group and the waits form a cycle 0 → 1 → 3 → 2 → 0: deadlock
    "cross_group_deadlock": [[_c("all-reduce", group=(0, 1)), _c("all-reduce", group=(0, 2))],
                             [_c("all-reduce", group=(1, 3)), _c("all-reduce", group=(0, 1))],
                             [_c("all-reduce", group=(0, 2)), _c("all-reduce", group=(2, 3))],
                             [_c("all-reduce", group=(2, 3)), _c("all-reduce", group=(1, 3))]],
}
