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

from typing import Any

from .collectives import NAMES, NCCL_NAMES
from .errors import TPMathError
from .validate import parse_json

CALL_NAMES = NAMES + ("barrier",)
DTYPES = ("float64", "float32", "float16", "bfloat16", "int64", "int32", "int8", "uint8", "bool")


def _err(en: str, zh: str) -> TPMathError:
    return TPMathError(en, zh, field="calls")


def _validate_call(r: int, i: int, call: Any, n: int) -> dict:
    """One call dict, normalised: name, shape (tuple of ints), dtype, group (sorted tuple)."""
    where, where_zh = f"calls[{r}][{i}]", f"calls[{r}][{i}]"
    if not isinstance(call, dict):
        raise _err(f"{where}: expected an object with name, shape, dtype, group; got {call!r:.60}",
                   f"{where_zh}：需要含 name、shape、dtype、group 的对象，收到 {call!r:.60}")
    name = call.get("name")
    if name not in CALL_NAMES:
        raise _err(f"{where}: unknown collective {name!r}; expected one of {', '.join(CALL_NAMES)}",
                   f"{where_zh}：未知的集合操作 {name!r}；可选 {', '.join(CALL_NAMES)}")
    shape = call.get("shape", [])
    if not isinstance(shape, (list, tuple)) or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape):
        raise _err(f"{where}: shape must be a list of non-negative integers, got {shape!r:.60}",
                   f"{where_zh}：shape 必须是非负整数列表，收到 {shape!r:.60}")
    dtype = call.get("dtype", "float32")
    if dtype not in DTYPES:
        raise _err(f"{where}: unknown dtype {dtype!r}; expected one of {', '.join(DTYPES)}",
                   f"{where_zh}：未知 dtype {dtype!r}；可选 {', '.join(DTYPES)}")
    group = call.get("group", list(range(n)))
    if (not isinstance(group, (list, tuple)) or not group
            or not all(isinstance(g, int) and not isinstance(g, bool) and 0 <= g < n for g in group)
            or len(set(group)) != len(group)):
        raise _err(f"{where}: group must be a non-empty list of distinct ranks in 0…{n - 1}, got {group!r:.60}",
                   f"{where_zh}：group 必须是 0…{n - 1} 内互不相同的 rank 组成的非空列表，收到 {group!r:.60}")
    return {"name": name, "shape": tuple(shape), "dtype": dtype, "group": tuple(sorted(group))}


def validate_calls(calls: Any) -> list[list[dict]]:
    """Per-rank call lists (JSON string or Python lists), validated and normalised."""
    calls = parse_json("calls", calls)
    if not isinstance(calls, (list, tuple)) or not calls or not all(isinstance(c, (list, tuple)) for c in calls):
        raise _err(f"calls: expected a non-empty list with one list of calls per rank, got {calls!r:.60}",
                   f"calls：需要非空列表，每个 rank 一个调用列表，收到 {calls!r:.60}")
    n = len(calls)
    return [[_validate_call(r, i, c, n) for i, c in enumerate(seq)] for r, seq in enumerate(calls)]


def _describe(call: dict) -> str:
    """e.g. AllReduce(shape (4,), float32, group [0, 1])."""
    nccl = NCCL_NAMES.get(call["name"], "Barrier")
    return f"{nccl}(shape {list(call['shape'])}, {call['dtype']}, group {list(call['group'])})"


def _hang(r: int, i: int, call: dict | None, code: str, en: str, zh: str, peer: int | None) -> dict:
    return {"rank": r, "call_index": i, "call": None if call is None else _describe(call),
            "code": code, "peer": peer, "message_en": en, "message_zh": zh}


def _count(call: dict) -> int:
    """Elements in the buffer: NCCL sees a pointer and a count, not a shape."""
    total = 1
    for s in call["shape"]:
        total *= s
    return total


def _meeting_problem(r: int, members: tuple, seqs: list[list[dict]], pc: list[int]) -> dict | None:
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
            code = "order" if later else "name_mismatch"
            en = (f"rank {r} waits forever at call {i} {_describe(mine)}: on this group it is met by "
                  f"rank {g}'s call {j} {_describe(other)}; collectives on a group are matched by position, "
                  + ("and rank " + str(r) + " calls " + NCCL_NAMES[other['name']] + " only later: the ranks "
                     "issue the same collectives in a different order" if later else
                     "and the names differ"))
            zh = (f"rank {r} 在第 {i} 个调用 {_describe(mine)} 处永远等待：在该通信组上与 rank {g} 的第 {j} 个调用 "
                  f"{_describe(other)} 相遇；同一通信组上的集合操作按次序配对，"
                  + (f"而 rank {r} 稍后才调用 {NCCL_NAMES[other['name']]}：各 rank 调用顺序不同" if later else
                     "而两者名称不同"))
            return _stuck(_hang(r, i, mine, code, en, zh, g))
        if _count(other) != _count(mine):
            en = (f"rank {r} waits forever at call {i} {_describe(mine)}: rank {g} passes shape "
                  f"{list(other['shape'])} ({_count(other)} elements, here {_count(mine)}) to the same "
                  f"{NCCL_NAMES[mine['name']]}; the counts must be equal")
            zh = (f"rank {r} 在第 {i} 个调用 {_describe(mine)} 处永远等待：rank {g} 对同一个 "
                  f"{NCCL_NAMES[mine['name']]} 传入形状 {list(other['shape'])}（{_count(other)} 个元素，本 rank "
                  f"{_count(mine)} 个）；各 rank 的元素数必须相同")
            return _stuck(_hang(r, i, mine, "shape_mismatch", en, zh, g))
        if other["dtype"] != mine["dtype"]:
            en = (f"rank {r} waits forever at call {i} {_describe(mine)}: rank {g} passes dtype "
                  f"{other['dtype']} to the same {NCCL_NAMES[mine['name']]}; the dtypes must be equal")
            zh = (f"rank {r} 在第 {i} 个调用 {_describe(mine)} 处永远等待：rank {g} 对同一个 "
                  f"{NCCL_NAMES[mine['name']]} 传入 dtype {other['dtype']}；各 rank 的 dtype 必须相同")
            return _stuck(_hang(r, i, mine, "dtype_mismatch", en, zh, g))
    return None


UNDEFINED_EN = " (NCCL leaves this undefined: a hang, a crash or wrong data; gloo usually raises an error)"
UNDEFINED_ZH = "（NCCL 对此未定义：可能挂起、崩溃或得到错误数据；gloo 通常直接报错）"


def _stuck(entry: dict) -> dict:
    """A bad meeting: the rank cannot complete the call; say what NCCL does then."""
    entry["message_en"] = entry["message_en"].replace(" waits forever at ", " is stuck at ") + UNDEFINED_EN
    entry["message_zh"] = entry["message_zh"].replace(" 处永远等待", " 处卡住") + UNDEFINED_ZH
    return entry


def _wait_reason(r: int, seqs: list[list[dict]], pc: list[int], stuck: set[int]) -> dict:
    """Why rank r (blocked, its group not all present) can never proceed."""
    i = pc[r]
    mine = seqs[r][i]
    for g in mine["group"]:
        if g == r:
            continue
        if pc[g] >= len(seqs[g]):
            en = (f"rank {r} waits forever at call {i} {_describe(mine)}: rank {g} already exited "
                  f"after its {len(seqs[g])} call(s) and never joins")
            zh = (f"rank {r} 在第 {i} 个调用 {_describe(mine)} 处永远等待：rank {g} 在完成 {len(seqs[g])} "
                  f"个调用后已提前退出，不会再参与")
            return _hang(r, i, mine, "early_exit", en, zh, g)
        other = seqs[g][pc[g]]
        if other["group"] == mine["group"]:
            continue  # g is here; some other member is missing
        if g in stuck:
            en = (f"rank {r} waits forever at call {i} {_describe(mine)}: rank {g} is itself stuck at "
                  f"its call {pc[g]} {_describe(other)}")
            zh = (f"rank {r} 在第 {i} 个调用 {_describe(mine)} 处永远等待：rank {g} 自身卡在第 {pc[g]} 个调用 "
                  f"{_describe(other)}")
            return _hang(r, i, mine, "blocked_peer", en, zh, g)
        later = any(c["group"] == mine["group"] for c in seqs[g][pc[g] + 1:])
        if later:
            en = (f"rank {r} waits forever at call {i} {_describe(mine)}: rank {g} is blocked in "
                  f"{_describe(other)} (its call {pc[g]}) and calls group {list(mine['group'])} only later: "
                  "the ranks use the groups in a different order (deadlock)")
            zh = (f"rank {r} 在第 {i} 个调用 {_describe(mine)} 处永远等待：rank {g} 阻塞在其第 {pc[g]} 个调用 "
                  f"{_describe(other)}，稍后才调用通信组 {list(mine['group'])}：各 rank 使用通信组的顺序不同（死锁）")
            return _hang(r, i, mine, "order", en, zh, g)
        en = (f"rank {r} waits forever at call {i} {_describe(mine)}: rank {g} calls "
              f"{_describe(other)} instead and never calls a collective on group {list(mine['group'])}: "
              "the ranks disagree on the group")
        zh = (f"rank {r} 在第 {i} 个调用 {_describe(mine)} 处永远等待：rank {g} 调用的是 {_describe(other)}，"
              f"从不在通信组 {list(mine['group'])} 上调用集合操作：各 rank 对通信组不一致")
        return _hang(r, i, mine, "group_mismatch", en, zh, g)
    en = f"rank {r} waits forever at call {i} {_describe(mine)}: its group never assembles"
    zh = f"rank {r} 在第 {i} 个调用 {_describe(mine)} 处永远等待：其通信组始终无法凑齐"
    return _hang(r, i, mine, "blocked_peer", en, zh, None)


def check_calls(calls: Any) -> dict:
    """Replay per-rank call sequences; report completed collectives and every rank that hangs.

    Returns ``{"ok", "n", "matched", "completed": [{"name","group","call_index": {rank: i}}],
    "exited": [rank …], "hangs": [{"rank","call_index","call","code","peer","message_en","message_zh"}]}``.
    """
    seqs = validate_calls(calls)
    n = len(seqs)
    pc = [0] * n
    completed: list[dict] = []
    problems: dict[int, dict] = {}  # rank -> hang entry from a bad meeting (stuck for good)
    progress = True
    while progress:
        progress = False
        for r in range(n):
            if r in problems or pc[r] >= len(seqs[r]):
                continue
            call = seqs[r][pc[r]]
            members = call["group"]
            if r not in members:
                en = (f"rank {r} calls {_describe(call)} (its call {pc[r]}) on a group that does not contain it")
                zh = (f"rank {r} 在不包含自己的通信组上调用 {_describe(call)}（其第 {pc[r]} 个调用）")
                problems[r] = _hang(r, pc[r], call, "not_in_group", en, zh, None)
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
            completed.append({"name": call["name"], "group": list(members),
                              "call_index": {str(g): pc[g] for g in members}})
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
    return {
        "ok": not hangs, "n": n, "matched": len(completed), "completed": completed,
        "exited": [r for r in range(n) if pc[r] >= len(seqs[r])],
        "hangs": hangs,
    }


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
