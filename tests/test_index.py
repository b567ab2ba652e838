"""Page 1 views (mlp, backward, dp-tp, precision, collectives, mismatch, ring, vocab-ce,
vocab-extras): every checked cell equals ``fmt`` applied to a number computed here,
independently, with plain numpy (or PyTorch), never to the view's own output (a matrix cell is
a grid: its numbers as printed, and the rank that tints it; see grid_cells.py); bad
control values raise TPMathError naming the control; the i18n keys the views emit
exist in both string tables, which have the same keys.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from pathlib import Path

import numpy as np
import pytest

from tpmath import TPMathError, collectives
from tpmath.mlp import default_inputs
from tpmath import fmt
from tpmath.i18n import text
from tpmath.views import render, render_json, sections

from grid_cells import printed, rank_row, shown, tint

ROOT = Path(__file__).resolve().parents[1]
PAGE1 = ("mlp", "backward", "dp-tp", "precision", "collectives", "mismatch", "ring", "vocab-ce", "vocab-head",
         "vocab-extras")
LOGITS = np.array([1.2, -0.5, 2, 0.1, 1.4, -1])     # the seed's logits (an input)


def rows(res, name):
    return res["tables"][name]["rows"]


def foot(res, name):
    return res["tables"][name]["foot"]


def parse_err(text: str) -> float:
    """The number behind an fmt.err string ("< 1e-15" counts as 1e-15)."""
    return 1e-15 if text.startswith("<") else float(text.replace("\u2212", "-"))


# ------------------------------------------------------------------------------ MLP

def mlp_reference(tp):
    """Per-rank forward/backward of the column→row MLP, written out from the formulas."""
    d = default_inputs()
    X, W1, W2, G = d["X"], d["W1"], d["W2"], d["G"]
    F = W1.shape[1]
    k = F // tp
    ranks = []
    for r in range(tp):
        cols = slice(r * k, (r + 1) * k)
        w1, w2 = W1[:, cols], W2[cols, :]
        z = X @ w1
        h = np.tanh(z)
        gh = G @ w2.T
        gz = gh * (1 - h ** 2)
        ranks.append({"W1": w1, "W2": w2, "Z": z, "H": h, "Y_partial": h @ w2, "G_H": gh, "G_Z": gz,
                      "G_W1": X.T @ gz, "G_W2": h.T @ G, "G_X_partial": gz @ w1.T})
    H = np.tanh(X @ W1)
    GZ = (G @ W2.T) * (1 - H ** 2)
    full = {"X": X, "W1": W1, "W2": W2, "G": G, "Z": X @ W1, "H": H, "Y": H @ W2, "G_H": G @ W2.T,
            "G_Z": GZ, "G_X": GZ @ W1.T, "G_W1": X.T @ GZ, "G_W2": H.T @ G}
    return ranks, full


@pytest.mark.parametrize("tp", [1, 2, 4])
def test_mlp_stages_match_numpy(tp):
    ranks, full = mlp_reference(tp)
    expect = {
        "forward": (("W1", "W1"), ("Z", "Z"), ("H", "H")),
        "partial": (("W1", "W1"), ("H", "H"), ("Y_partial", "Y")),
        "backward": (("W2", "W2"), ("G_H", "G_H"), ("G_Z", "G_Z")),
        "grad-w": (("W1", "W1"), ("G_W1", "G_W1"), ("G_W2", "G_W2")),
        "grad-x": (("W1", "W1"), ("G_Z", "G_Z"), ("G_X_partial", "G_X")),
    }
    for stage, cols in expect.items():
        res = render("mlp", {"stage": stage, "tp": str(tp)})
        for r, row in enumerate(rows(res, "mlp-ranks")):
            assert [shown(c) for c in row] == rank_row(r, *(ranks[r][key] for key, _ in cols)), (stage, r)
            assert [tint(c) for c in row] == [r] * len(row)          # rank r's blocks carry its colour
        ref_row, merged_row, err_row = foot(res, "mlp-ranks")
        assert ref_row[0] == {"key": "label.reference"}
        assert [shown(c) for c in ref_row[1:]] == [printed(full[name]) for _, name in cols]
        assert [shown(c) for c in merged_row[1:]] == [printed(full[name]) for _, name in cols]
        assert {tint(c) for c in ref_row[1:] + merged_row[1:]} == {None}   # whole results: untinted
        assert all(parse_err(c) < 1e-12 for c in err_row[1:])
    loss = float(np.sum(full["Y"] * full["G"]))
    assert res["values"]["loss"] == fmt.num(loss)
    assert res["values"]["reference-loss"] == fmt.num(loss)


def test_mlp_shards_stage_lists_columns():
    ranks, _ = mlp_reference(4)
    res = render("mlp", {"stage": "shards", "tp": 4})
    assert [row[1] for row in rows(res, "mlp-ranks")] == ["0", "1", "2", "3"]
    assert [shown(row[2]) for row in rows(res, "mlp-ranks")] == [printed(r["W1"]) for r in ranks]
    assert [shown(row[3]) for row in rows(res, "mlp-ranks")] == [printed(r["W2"]) for r in ranks]
    inputs = {row[0]: row for row in rows(res, "mlp-inputs")}
    d = default_inputs()
    for name, key in (("X", "X"), ("W₁", "W1"), ("W₂", "W2"), ("G", "G")):
        assert shown(inputs[name][1]) == printed(d[key]) and tint(inputs[name][1]) is None
    res2 = render("mlp", {"stage": "shards", "tp": "2"})
    assert [row[1] for row in rows(res2, "mlp-ranks")] == ["0–1", "2–3"]


# ------------------------------------------------------------------------- backward

def finite_diff(name, full, h=1e-6):
    """Central differences of L = Σ tanh(X W1) W2 ⊙ G with respect to ``name``."""
    args = {k: full[k].copy() for k in ("X", "W1", "W2")}
    loss = lambda a: float(np.sum((np.tanh(a["X"] @ a["W1"]) @ a["W2"]) * full["G"]))
    out = np.zeros_like(args[name])
    for idx in np.ndindex(out.shape):
        plus, minus = dict(args), dict(args)
        plus[name] = args[name].copy(); plus[name][idx] += h
        minus[name] = args[name].copy(); minus[name][idx] -= h
        out[idx] = (loss(plus) - loss(minus)) / (2 * h)
    return out


@pytest.mark.parametrize("tp", [2, 4])
def test_backward_gradients_per_rank_and_checks(tp):
    ranks, full = mlp_reference(tp)
    res = render("backward", {"tp": str(tp)})
    for r, row in enumerate(rows(res, "backward-grads")):
        assert [shown(c) for c in row] == rank_row(r, *(ranks[r][k] for k in ("G_H", "G_Z", "G_W1", "G_W2",
                                                                            "G_X_partial")))
        assert [tint(c) for c in row] == [r] * len(row)
    check = rows(res, "grad-check")
    for row, key in zip(check, ("G_X", "G_W1", "G_W2")):
        assert shown(row[2]) == printed(full[key]) and tint(row[2]) is None
        assert parse_err(row[3]) < 1e-12
        # analytic vs our own finite differences: agreement to FD accuracy
        fd = finite_diff(key[2:] if key != "G_X" else "X", full)
        assert np.max(np.abs(fd - full[key])) < 1e-8
        assert row[4] == "<\u00a01e\u22127"   # below the stated FD tolerance, shown the same in every runtime
    assert check[0][1] == {"key": "label.via_allreduce"}
    assert check[1][1] == check[2][1] == {"key": "label.via_local"}


@pytest.mark.parametrize("tp,dp", [(2, 2), (4, 1), (1, 4), (4, 2)])
def test_dp_tp_variants_scale(tp, dp):
    from tpmath.dp_tp import make_inputs
    inp = make_inputs(tp, dp, 0, 2, 2, 2 * tp)        # the demo's inputs (seed 0, batch 2, D 2, F 2·tp)
    X, G = np.concatenate(inp["X"]), np.concatenate(inp["G"])
    W1, W2 = inp["W1"], inp["W2"]
    Gm = G / X.shape[0]                                # mean loss over the global batch
    H = np.tanh(X @ W1)
    ref = np.concatenate([(X.T @ ((Gm @ W2.T) * (1 - H ** 2))).ravel(), (H.T @ Gm).ravel()])
    res = render("dp-tp", {"tp": tp, "dp": dp})
    expected_scale = {"correct": 1.0, "divide_by_tp_too": 1 / tp, "double_count_gy": float(tp),
                      "dp_sum_no_mean": float(dp)}
    table = rows(res, "dp-tp")
    assert [row[0]["key"] for row in table] == [f"label.variant_{n}" for n in expected_scale]
    for row, (name, s) in zip(table, expected_scale.items()):
        assert row[3] == fmt.num(s), name
        err = abs(s - 1) * np.max(np.abs(ref))
        if err == 0:
            assert parse_err(row[2]) < 1e-12
        else:
            assert math.isclose(parse_err(row[2]), err, rel_tol=0.06), name
    assert res["values"]["world-size"] == fmt.integer(dp * tp)


@pytest.mark.parametrize("dtype", ["float64", "float32", "float16"])
def test_precision_within_stated_tolerance(dtype):
    res = render("precision", {"dtype": dtype, "tp": "2"})
    for row in rows(res, "precision"):
        err, tol = parse_err(row[1]), parse_err(row[2])
        assert row[3] == {"key": "label.yes" if err <= tol else "label.no"}
    if dtype == "float64":
        assert all(parse_err(row[1]) < 1e-13 for row in rows(res, "precision"))
    # one SGD step (float64), computed here: W ← W − 0.1·G_W
    _, full = mlp_reference(1)
    W1n, W2n = full["W1"] - 0.1 * full["G_W1"], full["W2"] - 0.1 * full["G_W2"]
    sgd = rows(res, "sgd-step")
    assert shown(sgd[0][1]) == shown(sgd[0][2]) == printed(W1n)
    assert shown(sgd[1][1]) == shown(sgd[1][2]) == printed(W2n)
    after = float(np.sum((np.tanh(full["X"] @ W1n) @ W2n) * full["G"]))
    assert res["values"]["loss-after"] == res["values"]["loss-after-reference"] == fmt.num(after)
    assert res["values"]["loss-before"] == fmt.num(np.sum(full["Y"] * full["G"]))


# ---------------------------------------------------------------------- collectives

def expected_collective(name, xs, op, root):
    """NCCL semantics written out directly."""
    n = len(xs)
    red = {"sum": sum(xs), "avg": sum(xs) / n, "max": np.max(xs, axis=0), "min": np.min(xs, axis=0),
           "prod": np.prod(xs, axis=0)}[op]
    blocks = lambda v: np.split(v, n)
    if name == "all-reduce":
        return [red] * n
    if name == "reduce":
        return [red if r == root else None for r in range(n)]
    if name == "broadcast":
        return [xs[root]] * n
    if name == "all-gather":
        return [np.concatenate(xs)] * n
    if name == "reduce-scatter":
        return blocks(red)
    if name == "all-to-all":
        return [np.concatenate([blocks(xs[i])[j] for i in range(n)]) for j in range(n)]
    if name == "gather":
        return [np.concatenate(xs) if r == root else None for r in range(n)]
    if name == "scatter":
        return blocks(xs[root])
    raise AssertionError(name)


@pytest.mark.parametrize("name", ["all-reduce", "reduce", "broadcast", "all-gather", "reduce-scatter",
                                  "all-to-all", "gather", "scatter"])
@pytest.mark.parametrize("n,op,root", [(2, "sum", 0), (3, "max", 2), (4, "avg", 1)])
def test_collective_tables(name, n, op, root):
    length = 4 if n in (2, 4) else 6
    xs = [np.arange(1, length + 1) * 10.0 ** r for r in range(n)]
    res = render("collectives", {"collective": name, "op": op, "ranks": str(n), "root": str(root)})
    exp = expected_collective(name, xs, op, root)
    for r, row in enumerate(rows(res, "collective")):
        assert shown(row[0]) == f"R{r}" and shown(row[1]) == printed(xs[r])
        assert shown(row[2]) == ({"key": "label.nothing"} if exp[r] is None else printed(exp[r]))
        assert [tint(c) for c in row if "el" in c] == [r] * (2 if exp[r] is None else 3)
    red = expected_collective("all-reduce", xs, op, root)[0]
    for r, row in enumerate(rows(res, "rs-ag")):
        assert [shown(c) for c in row[:4]] == rank_row(r, np.split(red, n)[r], red, red)
        assert [tint(c) for c in row[:4]] == [r] * 4
        assert row[4] == "<\u00a01e\u221215"


def test_collective_seed_alltoall():
    res = render("collectives", None)
    assert [[shown(c) for c in row[1:]] for row in rows(res, "collective")] == [
        [[["1", "2", "3", "4"]], [["1", "2", "10", "20"]]],
        [[["10", "20", "30", "40"]], [["3", "4", "30", "40"]]]]
    assert res["values"]["nccl-name"] == "AlltoAll"


def test_mismatch_scenarios():
    ok = render("mismatch", {"scenario": "ok"})
    assert ok["notes"]["verdict"] == {"key": "note.mismatch_ok", "args": {"matched": "2"}}
    assert rows(ok, "mismatch-hangs") == []
    early = render("mismatch", {"scenario": "early_exit"}, "zh")
    hang = rows(early, "mismatch-hangs")
    assert [[shown(c) for c in h[:3]] for h in hang] == [["R0", "#1", {"key": "label.hang_early_exit"}]]
    assert [shown(row[0]) for row in rows(early, "mismatch-calls")] == ["R0", "R1"]
    assert re.search(r"[\u4e00-\u9fff]", text(hang[0][3], "zh"))   # the Chinese explanation on the zh page
    assert early["values"]["matched"] == "1"
    swapped = render("mismatch", {"scenario": "order_swapped"})
    assert [shown(h[0]) for h in rows(swapped, "mismatch-hangs")] == ["R0", "R1"]


@pytest.mark.parametrize("n,count", [(4, 8), (2, 4), (8, 1024), (3, 10)])
def test_ring_bytes(n, count):
    res = render("ring", {"ranks": str(n), "algorithm": "ring", "count": count})
    steps = rows(res, "ring-steps")
    assert len(steps) == 2 * (n - 1) and res["values"]["steps"] == fmt.integer(2 * (n - 1))
    chunk = [count // n + (1 if k < count % n else 0) for k in range(n)]
    for r, row in enumerate(rows(res, "ring-bytes")):
        assert shown(row[0]) == f"R{r}" and tint(row[0]) == r
        sent = (2 * count - chunk[r] - chunk[(r + 1) % n]) * 4     # all chunks twice except two
        assert row[1] == fmt.integer(2 * (n - 1))
        assert row[2] == fmt.integer(sent) + "\u00a0B"
        if count % n == 0:
            assert sent == 2 * (n - 1) * count // n * 4
    # every ring step forwards each of the n chunks once: the whole buffer crosses the ring per step
    assert [row[3] for row in steps] == [fmt.integer(count * 4) + "\u00a0B"] * (2 * (n - 1))
    if n <= 4 and count <= 8:
        total = sum(np.arange(1, count + 1) * 10.0 ** r for r in range(n))
        assert shown(steps[-1][4]) == [(f"R{r}", printed(total)[0]) for r in range(n)]
        # after the ReduceScatter half, rank r holds the whole sum of its chunk r (NCCL's layout)
        bounds = np.cumsum([0] + chunk)
        for r, (tag, row) in enumerate(shown(steps[n - 2][4])):
            assert row[bounds[r]:bounds[r + 1]] == printed(total[bounds[r]:bounds[r + 1]])[0], tag
    else:
        assert steps[-1][4] == {"key": "label.buffers_hidden"}
    assert res["values"]["bus-factor"] == fmt.num(2 * (n - 1) / n)


def test_tree_bytes():
    n, count = 5, 1000
    res = render("ring", {"ranks": str(n), "algorithm": "tree", "count": count})
    for r, row in enumerate(rows(res, "ring-bytes")):
        children = len([c for c in (2 * r + 1, 2 * r + 2) if c < n])
        msgs = children + (1 if r else 0)
        assert row[1] == fmt.integer(msgs) and row[2] == fmt.integer(msgs * count * 4) + "\u00a0B"
    # reduce: every rank of the deepest level first (ranks 3, 4 at depth 2), then depth 1; broadcast mirrors it
    per_level = [2 * 1000 * 4, 2 * 1000 * 4]
    assert [row[3] for row in rows(res, "ring-steps")] == [fmt.integer(b) + "\u00a0B" for b in per_level + per_level[::-1]]


# ----------------------------------------------------------------------- vocab CE

def ce_reference(z, y, shards):
    """Vocab-parallel CE by the formulas: padded to a multiple of shards, masked."""
    V = len(z)
    Vp = -(-V // shards) * shards
    K = Vp // shards
    zp = np.concatenate([z, np.full(Vp - V, -np.inf)])
    m = np.max(z)
    p = np.exp(z - m) / np.sum(np.exp(z - m))
    per_rank = []
    for r in range(shards):
        part = zp[r * K:(r + 1) * K]
        per_rank.append({"logits": part, "max": np.max(part), "sumexp": np.sum(np.exp(part - m)),
                         "t": (z[y] - m) if r * K <= y < (r + 1) * K else 0.0})
    return {"m": m, "s": np.sum(np.exp(z - m)), "loss": np.log(np.sum(np.exp(z - m))) - (z[y] - m),
            "p": p, "grad": p - np.eye(V)[y], "ranks": per_rank, "K": K, "Vp": Vp}


@pytest.mark.parametrize("shards,target,shift", [(2, 2, 0), (1, 0, 0), (3, 5, 7.5), (4, 3, -1000), (5, 1, 0.25),
                                                  (6, 4, 1e4)])
def test_vocab_ce_tables(shards, target, shift):
    z = LOGITS + shift
    ref = ce_reference(z, target, shards)
    res = render("vocab-ce", {"shards": str(shards), "target": str(target), "shift": str(shift)})
    v = res["values"]
    assert v["global-max"] == fmt.num(ref["m"])
    assert v["global-sum-exp"] == fmt.num(ref["s"])
    assert v["loss"] == fmt.num(ref["loss"])
    assert v["target-rank"] == f"R{target // ref['K']}"
    assert parse_err(v["abs-diff"]) < 1e-12
    assert parse_err(v["shift-diff"]) < 1e-10           # shifting changes nothing (to rounding)
    assert v["padded-vocab"] == fmt.integer(ref["Vp"])
    for r, row in enumerate(rows(res, "vocab-ranks")):
        e = ref["ranks"][r]
        assert shown(row[0]) == f"R{r}" and tint(row[0]) == tint(row[2]) == r
        assert [shown(c) for c in row[2:]] == [printed(e["logits"]), fmt.num(e["max"]), fmt.num(e["sumexp"]),
                                              fmt.num(e["t"])]
    for j, row in enumerate(rows(res, "vocab-tokens")):
        assert [shown(c) for c in row] == [str(j), f"R{j // ref['K']}", fmt.num(ref["p"][j]), fmt.num(ref["grad"][j])]
    assert ("padding" in res["notes"]) == (ref["Vp"] != 6)


def test_vocab_ce_default_target_shows_the_merge():
    """The section opens on a target that is not the largest logit, so one rank's target term is
    z_y − m ≠ 0 and the other's is 0 (with target 2, the largest, both would be 0)."""
    res = render("vocab-ce", None)
    y = int(res["controls"]["target"])
    assert y != int(np.argmax(LOGITS))
    ref = ce_reference(LOGITS, y, int(res["controls"]["shards"]))
    terms = [row[5] for row in rows(res, "vocab-ranks")]
    assert terms == [fmt.num(e["t"]) for e in ref["ranks"]]
    assert sorted(terms) == sorted([fmt.num(LOGITS[y] - LOGITS.max()), fmt.num(0.0)])
    # the prose quotes this term: z_y − m = 1.4 − 2 = −0.6 for target 4
    for lang in ("en", "zh"):
        md = (ROOT / "content" / lang / "index.md").read_text(encoding="utf-8")
        quoted = re.search(r"z_y-m=([-\d.]+)-([-\d.]+)=([-\d.]+)", md)
        assert [float(x) for x in quoted.groups()] == pytest.approx([LOGITS[y], LOGITS.max(), LOGITS[y] - LOGITS.max()])
        assert re.search(rf"(target|token) {y}\b", md)


def test_vocab_padding_megatron_rule():
    res = render("vocab-extras", {"tp": "2"})
    padded = {row[0]: row[2] for row in rows(res, "vocab-padding")}
    assert padded["1"] == fmt.integer(50304) and padded["8"] == fmt.integer(51200)
    for row in rows(res, "vocab-padding"):
        tp = int(row[0])
        assert row[2] == fmt.integer(math.ceil(50257 / (128 * tp)) * 128 * tp)


def megatron_smoothed(z, y, eps, tp, r):
    """Megatron's loss on rank r: the logits padded to a multiple of tp with 0 (unmasked, as Megatron
    leaves its padded logits), K = Vp/tp columns per rank, s = ε K/(K−1),
    (1−s)·nll − s·mean_{k in the rank's K columns} log p_k.  None when K = 1 and ε > 0."""
    V = len(z)
    Vp = -(-V // tp) * tp
    K = Vp // tp
    zp = np.concatenate([z, np.zeros(Vp - V)])
    logp = zp - np.max(zp) - np.log(np.sum(np.exp(zp - np.max(zp))))
    if eps == 0:
        return -logp[y]
    if K == 1:
        return None
    s = eps * K / (K - 1)
    return (1 - s) * (-logp[y]) - s * np.mean(logp[r * K:(r + 1) * K])


@pytest.mark.parametrize("tp,eps", [(1, 0.1), (2, 0.1), (3, 0.3), (2, 0.0), (4, 0.1), (4, 0.0), (5, 0.2), (6, 0.1)])
def test_vocab_smoothing_pytorch_and_megatron(tp, eps):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    want = float(F.cross_entropy(torch.tensor(LOGITS)[None], torch.tensor([2]), label_smoothing=eps))
    res = render("vocab-extras", {"tp": str(tp), "smoothing": eps})
    assert res["values"]["smoothing-loss"] == fmt.num(want)
    assert res["values"]["smoothing-reference"] == fmt.num(want)
    assert res["tables"]["vocab-smoothing"]["columns"][2] == "col.k_padded"
    K = -(-6 // tp)                                    # the padded width: Vp/tp
    for r, row in enumerate(rows(res, "vocab-smoothing")):
        assert shown(row[0]) == f"R{r}"
        assert row[2] == fmt.integer(K)
        Vp = K * tp                                    # Megatron's mean of log p over the rank's K columns
        zp = np.concatenate([LOGITS, np.zeros(Vp - 6)])
        logp = zp - zp.max() - np.log(np.exp(zp - zp.max()).sum())
        assert row[4] == fmt.num(logp[r * K:(r + 1) * K].mean())
        assert row[5] == fmt.num(want)
        meg = megatron_smoothed(LOGITS, 2, eps, tp, r)
        if meg is None:
            assert row[6]["key"] == "label.undefined_k" and row[7] == "—"
        else:
            assert row[6] == fmt.num(meg) and row[7] == fmt.err(meg - want)
    tp1 = megatron_smoothed(LOGITS, 2, eps, 1, 0)
    assert foot(res, "vocab-smoothing")[1][6] == fmt.num(tp1)
    if tp > 1 and eps > 0 and K > 1:   # the per-rank losses disagree: Megatron's discrepancy
        assert len({row[6] for row in rows(res, "vocab-smoothing")}) > 1
    note = res["notes"]["vocab-megatron"]
    if 6 % tp:                         # padding: the note states the padded logits' value
        assert note["key"] == "note.vocab_megatron_pad"
        assert note["args"]["pad"] == fmt.num(0.0) and note["args"]["K"] == str(K)
        assert note["args"]["padded"] == str(K * tp)
    else:
        assert note["key"] == "note.vocab_megatron_k" and note["args"]["K"] == str(K)


def test_vocab_extras_default_shows_padding():
    """The extras open on a tp that does not divide V = 6, the case of Megatron's padded width."""
    res = render("vocab-extras", None)
    tp = int(res["controls"]["tp"])
    assert 6 % tp != 0
    note = res["notes"]["vocab-megatron"]
    assert note["key"] == "note.vocab_megatron_pad"
    padded = -(-6 // tp) * tp
    assert (note["args"]["padded"], note["args"]["K"]) == (str(padded), str(padded // tp))
    # the prose quotes the same case
    for lang in ("en", "zh"):
        md = (ROOT / "content" / lang / "index.md").read_text(encoding="utf-8")
        assert f"$t={tp}$" in md and f"$K={padded // tp}$" in md and f"{padded}" in md


def test_vocab_ignore_and_hidden_gradient():
    res = render("vocab-extras", {"tp": "3", "smoothing": 0})
    Z = np.array([LOGITS, LOGITS[::-1], np.roll(LOGITS, -2)])
    ys = [2, -100, 4]
    losses, grads = [], []
    for z, y in zip(Z, ys):
        if y == -100:
            losses.append(0.0); grads.append(np.zeros(6)); continue
        r = ce_reference(z, y, 1)
        losses.append(r["loss"]); grads.append(r["grad"] / 2)     # mean over 2 counted positions
    table = rows(res, "vocab-ignore")
    assert [row[3] for row in table] == [fmt.num(x) for x in losses]
    assert [shown(row[4]) for row in table] == [printed(g) for g in grads]
    assert [shown(row[1]) for row in table] == [printed(z) for z in Z]
    assert {tint(row[1]) for row in table} | {tint(row[4]) for row in table} == {None}   # positions, not ranks
    assert table[1][2] == {"key": "label.ignored", "args": {"index": "−100"}}
    assert foot(res, "vocab-ignore")[0][3] == fmt.num((losses[0] + losses[2]) / 2)


def test_output_layer_gradient_is_its_own_demo():
    """The output layer's tables are the vocab-head block's, not vocab-extras' (issue 25, item 15)."""
    assert not {"vocab-head-inputs", "vocab-hidden"} & set(render("vocab-extras", {"tp": "3"})["tables"])
    res = render("vocab-head", {"tp": "3"})
    assert list(res["tables"]) == ["vocab-head-inputs", "vocab-hidden"]
    # output head: logits = h W_out, dL/dh = (softmax − onehot)/N · W_outᵀ, summed over shards
    from tpmath.vocab_ce import default_head_inputs
    d = default_head_inputs()
    h, W, t = d["hidden"], d["W_out"], d["target"]
    logits = h @ W
    P = np.exp(logits - logits.max(1, keepdims=True)); P /= P.sum(1, keepdims=True)
    Gz = (P - np.eye(W.shape[1])[t]) / len(t)
    hid = foot(res, "vocab-hidden")
    assert shown(hid[0][4]) == shown(hid[1][4]) == printed(Gz @ W.T)
    K = 2
    for r, row in enumerate(rows(res, "vocab-hidden")):
        assert shown(row[2]) == printed(W[:, r * K:(r + 1) * K])                # the rank's columns of W_out
        assert shown(row[3]) == printed(Gz[:, r * K:(r + 1) * K])               # of the mean loss (÷ 2)
        assert shown(row[4]) == printed(Gz[:, r * K:(r + 1) * K] @ W[:, r * K:(r + 1) * K].T)
        assert [tint(c) for c in (row[0], row[2], row[3], row[4])] == [r] * 4
    spec = res["tables"]["vocab-hidden"]
    assert spec["caption"] == {"key": "cap.vocab_hidden", "args": {"n": "2"}}
    assert spec["columns"][3] == {"key": "col.g_logits", "args": {"n": "2"}}
    # the inputs are on the page: h, W_out and the targets (replicated: untinted grids)
    inputs = rows(res, "vocab-head-inputs")
    assert [row[:2] for row in inputs] == [["h", "(2, 3)"], ["W_out", "(3, 6)"], ["y", "(2,)"]]
    assert [shown(row[2]) for row in inputs] == [printed(h), printed(W), printed(t)]
    assert [tint(row[2]) for row in inputs] == [None, None, None]


def test_vocab_hidden_padding_columns_are_zero():
    """At tp = 4 (V = 6 padded to 8) the last rank holds two zero columns of W_out: logits 0, masked,
    so its gradient and its partial term are 0."""
    res = render("vocab-head", {"tp": "4"})
    last = rows(res, "vocab-hidden")[3]
    assert shown(last[2]) == printed(np.zeros((3, 2))) and shown(last[3]) == printed(np.zeros((2, 2)))
    assert shown(last[4]) == printed(np.zeros((2, 3)))


# ------------------------------------------------------------------ bad control values

@pytest.mark.parametrize("section,controls,field", [
    ("mlp", {"stage": "bogus"}, "stage"),
    ("mlp", {"tp": "3"}, "tp"),
    ("mlp", {"tp": "two"}, "tp"),
    ("backward", {"tp": 8}, "tp"),
    ("dp-tp", {"dp": "3"}, "dp"),
    ("precision", {"dtype": "float8"}, "dtype"),
    ("collectives", {"collective": "allreduce"}, "collective"),
    ("collectives", {"op": "mean"}, "op"),
    ("collectives", {"ranks": "5"}, "ranks"),
    ("collectives", {"collective": "broadcast", "ranks": "2", "root": "3"}, "root"),
    ("mismatch", {"scenario": "nope"}, "scenario"),
    ("ring", {"ranks": "9"}, "ranks"),
    ("ring", {"count": "0"}, "count"),
    ("ring", {"count": "1.5"}, "count"),
    ("ring", {"algorithm": "butterfly"}, "algorithm"),
    ("vocab-ce", {"shards": "7"}, "shards"),
    ("vocab-ce", {"target": "6"}, "target"),
    ("vocab-ce", {"shift": "1e5"}, "shift"),
    ("vocab-ce", {"shift": "abc"}, "shift"),
    ("vocab-ce", {"shift": ""}, "shift"),
    ("vocab-extras", {"smoothing": "1.5"}, "smoothing"),
    ("vocab-extras", {"tp": "0"}, "tp"),
])
def test_bad_controls(section, controls, field):
    with pytest.raises(TPMathError) as info:
        render(section, controls)
    assert info.value.field == field
    bad = str(list(controls.values())[-1])
    quoted = [bad] if bad else ["empty", "为空"]                  # the offending value is quoted
    try:
        quoted.append(repr(float(bad)))                           # as the number it was parsed to
    except ValueError:
        pass
    assert any(q in info.value.message("en") for q in quoted) and any(q in info.value.message("zh") for q in quoted)
    out = json.loads(render_json(section, json.dumps(controls), "zh"))
    assert out["ok"] is False and out["field"] == field and re.search(r"[\u4e00-\u9fff]", text(out["error"], "zh"))


# ------------------------------------------------------------------------------ i18n

def flat(d, prefix=""):
    out = {}
    for k, v in d.items():
        if isinstance(v, dict):
            out.update(flat(v, prefix + k + "."))
        else:
            out[prefix + k] = v
    return out


STRINGS = {lang: {k: v for path in sorted((ROOT / "content" / "i18n").glob(f"{lang}*.toml"))
                    if path.name.split(".")[0] == lang
                    for k, v in flat(tomllib.loads(path.read_text("utf-8"))).items()}
           for lang in ("en", "zh")}

SETTINGS = {
    "mlp": [{"stage": s, "tp": t} for s in ("shards", "forward", "partial", "backward", "grad-w", "grad-x")
            for t in ("1", "2")],
    "backward": [{}],
    "dp-tp": [{}],
    "precision": [{"dtype": d} for d in ("float64", "float32", "float16")],
    "collectives": [{"collective": c, "op": "max"} for c in collectives.NAMES],
    "mismatch": [{"scenario": s} for s in ("ok", "order_swapped", "early_exit", "shape_mismatch", "dtype_mismatch",
                                          "group_mismatch", "cross_group_deadlock")],
    "ring": [{"algorithm": "ring"}, {"algorithm": "tree", "ranks": "7"}, {"count": 100}],
    "vocab-ce": [{"shards": "4"}, {}],
    "vocab-head": [{"tp": "4"}, {}],
    "vocab-extras": [{"tp": "6", "smoothing": 0.2}, {}],
}


def keys_of(obj, out):
    """Every i18n key (with its args) inside a view result."""
    if isinstance(obj, dict):
        if "key" in obj:
            out.append((obj["key"], tuple(sorted(obj.get("args", {})))))
        for k, v in obj.items():
            if k in ("caption",) and isinstance(v, str):
                out.append((v, ()))
            elif k == "columns":
                out.extend((c, ()) for c in v if isinstance(c, str))
            else:
                keys_of(v, out)
    elif isinstance(obj, list):
        for v in obj:
            keys_of(v, out)
    return out


def test_string_tables_have_the_same_keys_and_placeholders():
    en, zh = STRINGS["en"], STRINGS["zh"]
    assert set(en) == set(zh)
    for key in en:
        assert set(re.findall(r"\{(\w+)\}", en[key])) == set(re.findall(r"\{(\w+)\}", zh[key])), key
        if key == "site.break_after":       # a setting, not a sentence: English breaks at spaces only
            continue
        assert en[key].strip() and zh[key].strip(), key


def test_every_emitted_key_exists_in_both_languages():
    assert set(SETTINGS) == set(PAGE1)
    secs = sections()
    for name, settings in SETTINGS.items():
        sec = secs[name]
        used = [(c.label_key, ()) for c in sec.controls]
        for controls in settings:
            for lang in ("en", "zh"):
                res = render(name, controls, lang)
                used += keys_of(res, [])
                used += [(f"value.{v.replace('-', '_')}", ()) for v in res["values"]]
                assert set(res["tables"]) <= set(sec.tables) and set(res["values"]) <= set(sec.values)
        for key, args in used:
            for lang in ("en", "zh"):
                assert key in STRINGS[lang], (name, key, lang)
                # every placeholder of the string is filled by the view
                assert set(re.findall(r"\{(\w+)\}", STRINGS[lang][key])) <= set(args), (key, lang)
        for c in sec.controls:     # non-numeric select options have labels in both languages
            for opt in c.options:
                if not str(opt).isdigit():
                    key = f"opt.{c.name.replace('-', '_')}.{str(opt).replace('-', '_')}"
                    assert key in STRINGS["en"] and key in STRINGS["zh"], key


def test_every_value_is_a_formatted_string():
    for name, settings in SETTINGS.items():
        res = render(name, settings[0])
        for key, v in res["values"].items():
            assert isinstance(v, str), (name, key)
        for t in res["tables"].values():
            for row in t["rows"] + t["foot"]:
                assert all(isinstance(c, (str, dict)) for c in row)


# ------------------------------------------------------------ issue 25, items 14 and 15 (page text)

@pytest.mark.parametrize("lang", ["en", "zh"])
def test_output_layer_example_has_its_own_section_before_the_extras(lang):
    md = (ROOT / "content" / lang / "index.md").read_text(encoding="utf-8")
    head, demo, extras = md.index("{#vocab-head"), md.index("{{demo vocab-head}}"), md.index("{#vocab-extras")
    assert md.index("{{demo vocab-ce}}") < head < md.index("W_\\text{out}=\\begin{bmatrix}") < demo < extras
    assert md.count("{{demo vocab-head}}") == 1
    # the sentence before the backward bullets says what the bullets (not the formulas) say
    assert "Each line also says" not in md and "每一行也说明了" not in md


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_ring_lower_bound_is_argued_and_cited(lang):
    md = (ROOT / "content" / lang / "index.md").read_text(encoding="utf-8")
    ring = md[md.index("{#ring"):md.index("{{demo ring}}")]
    assert "[\\[10\\]](#ref-10)" in ring and "$2(n-1)$" in ring and "$u$" in ring
    assert "receive the $n-1$ reduced shares" not in ring and "再收回自己没算的" not in ring
    assert 'id="ref-10">P. Patarasuk, X. Yuan.' in md and "10.1016/j.jpdc.2008.09.002" in md
