"""tpmath.ranks without torch: the per-rank records equal the page's tables, the commands
parse back to the same plan, bad options are TPMathErrors.  (Real runs: test_real.py.)"""

from __future__ import annotations

import shlex

import numpy as np
import pytest

from tpmath import TPMathError, collectives, i18n, ranks, views
from tpmath.real.__main__ import build_parser
from tpmath import fmt

from grid_cells import shown, text_rows


def records_by_name(per_rank: list, r: int) -> dict[str, str]:
    return {i18n.text(name): ranks.value_text(value) for name, value in per_rank[r]}


@pytest.mark.parametrize("tp", [1, 2, 4])
@pytest.mark.parametrize("stage", ["shards", "forward", "partial", "backward", "grad-w", "grad-x"])
def test_mlp_records_are_the_cells_of_the_mlp_table(tp, stage):
    """Every matrix a rank prints is the grid of that rank's row in the page's table, number
    for number."""
    res = views.render("mlp", {"tp": str(tp), "stage": stage})
    table = res["tables"]["mlp-ranks"]
    per_rank, _ = ranks.expected(ranks.plan("mlp", {"tp": tp, "stage": stage}))
    cols = table["columns"]
    key_of = {"col.local_w1": "W1", "col.local_w2": "W2", "col.z": "Z", "col.h": "H", "col.y_partial": "Y_partial",
              "col.g_h": "G_H", "col.g_z": "G_Z", "col.g_w1": "G_W1", "col.g_w2": "G_W2",
              "col.g_x_partial": "G_X_partial"}
    checked = 0
    for r, row in enumerate(table["rows"]):
        names = ranks.mlp_names(r, tp, 4)
        printed = records_by_name(per_rank, r)
        for col, cell in zip(cols, row):
            if col in key_of:
                assert text_rows(printed[names[key_of[col]]]) == shown(cell), (r, col)
                checked += 1
    assert checked == tp * sum(c in key_of for c in cols)
    if stage == "partial":   # the AllReduce result every rank prints is the merged footer row
        merged = table["foot"][1][cols.index("col.y_partial")]
        assert all(text_rows(records_by_name(per_rank, r)["Y ← all_reduce(SUM)"]) == shown(merged)
                   for r in range(tp))


@pytest.mark.parametrize("shards", [1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("target, shift", [(2, 0.0), (5, -3.5), (0, 1000.0)])
def test_vocab_records_are_the_cells_of_the_vocab_table(shards, target, shift):
    res = views.render("vocab-ce", {"shards": str(shards), "target": str(target), "shift": shift})
    rows = res["tables"]["vocab-ranks"]["rows"]
    per_rank, _ = ranks.expected(ranks.plan("vocab-ce", {"shards": shards, "target": target, "shift": shift}))
    for r, row in enumerate(rows):
        printed = {name.split("[")[0]: text for name, text in records_by_name(per_rank, r).items()}
        assert [text_rows(printed["z"]), printed["local max"], printed["local Σ exp(z − m)"],
                printed["z_y − m (0 unless y is here)"]] == [shown(c) for c in row[2:6]]
        assert printed["loss"] == res["values"]["loss"]
        assert printed["m ← all_reduce(MAX)"] == res["values"]["global-max"]
        assert printed["Σ exp ← all_reduce(SUM)"] == res["values"]["global-sum-exp"]


@pytest.mark.parametrize("name", collectives.NAMES)
@pytest.mark.parametrize("n", [2, 3, 4])
def test_collective_records_are_the_cells_of_the_collective_table(name, n):
    root = n - 1
    res = views.render("collectives", {"collective": name, "ranks": str(n), "op": "max", "root": str(root)})
    per_rank, check = ranks.expected(ranks.plan("collective", {"name": name, "ranks": n, "op": "max",
                                                               "root": root}))
    for r, row in enumerate(res["tables"]["collective"]["rows"]):
        (_, inp), (_, out) = per_rank[r]
        assert text_rows(ranks.value_text(inp)) == shown(row[1])
        if "key" in row[2]:                   # "receives nothing" (translated on the page)
            assert out == ranks.NOTHING
        else:
            assert text_rows(ranks.value_text(out)) == shown(row[2])
    assert [(i18n.text(n), v) for n, v in check] == [("max|Δ| outputs", f"0 {ranks.OK}")]


def test_row_and_column_records_are_the_cells_of_the_linear_tables():
    for tp in (1, 2, 4):
        c = {"tp": tp, "seed": 3, "batch": 3, "d_in": 4, "d_out": 4}
        fwd = views.render("row-linear", c)
        bwd = views.render("row-backward", c)
        row_fwd, _ = ranks.expected(ranks.plan("row-linear", {**c, "stage": "forward"}))
        col_fwd, _ = ranks.expected(ranks.plan("column-linear", {**c, "stage": "forward"}))
        row_bwd, _ = ranks.expected(ranks.plan("row-linear", {**c, "stage": "backward"}))
        col_bwd, _ = ranks.expected(ranks.plan("column-linear", {**c, "stage": "backward"}))
        for r in range(tp):
            texts = lambda recs: [text_rows(ranks.value_text(v)) for _, v in recs[r]]   # noqa: E731
            cells = lambda table: [shown(c) for c in table["rows"][r][1:]]            # noqa: E731
            assert texts(row_fwd)[:3] == cells(fwd["tables"]["row-ranks"])
            assert texts(col_fwd)[1:3] == cells(fwd["tables"]["col-ranks"])
            assert texts(row_bwd)[:3] == cells(bwd["tables"]["row-bwd-ranks"])
            t = texts(col_bwd)
            assert [t[0], t[1], t[3]] == cells(bwd["tables"]["col-bwd-ranks"])


def test_every_section_command_parses_back_to_the_same_plan():
    """The command on the page, given to tpmath.real's own parser, is the same run."""
    parser = build_parser()
    for section, controls in [("mlp", {"tp": "4", "stage": "grad-x"}), ("backward", {"tp": "1"}),
                              ("collectives", {"collective": "scatter", "ranks": "3", "root": "2"}),
                              ("mismatch", {"scenario": "cross_group_deadlock"}),
                              ("vocab-ce", {"shards": "4", "target": "5", "shift": "-2.5"}),
                              ("vocab-extras", {"tp": "3", "smoothing": "0.25"}),
                              ("row-linear", {"tp": 4, "seed": 9, "d_in": 8}), ("row-backward", {"batch": 1})]:
        result = views.render(section, controls)
        for run in result["real"]:
            argv = shlex.split(run["command"])
            args = parser.parse_args(argv[6:])
            given = {o.dest: getattr(args, o.dest) for o in ranks.options(args.example)}
            p = ranks.plan(args.example, given)
            assert int(argv[3]) == p["world"]
            assert ranks.format_output(*ranks.expected(p)) == run["output"], (section, controls)


def test_commands_write_only_what_differs_from_the_defaults():
    assert ranks.command("mlp", {}) == "torchrun --standalone --nproc-per-node 2 -m tpmath.real mlp"
    assert ranks.command("vocab-ce", {"shards": 3, "shift": -2.5, "logits": [[1, 2], [3, 4]], "target": [0, 1]}) == (
        "torchrun --standalone --nproc-per-node 3 -m tpmath.real vocab-ce --shards 3 --target '[0,1]' "
        "--shift -2.5 --logits '[[1,2],[3,4]]'")


@pytest.mark.parametrize("example, given, field", [
    ("mlp", {"tp": 3}, "tp"), ("mlp", {"stage": "sideways"}, "stage"), ("mlp", {"dtype": "int4"}, "dtype"),
    ("vocab-ce", {"shards": 0}, "shards"), ("vocab-ce", {"target": 6}, "target"),
    ("collective", {"name": "all-sum"}, "name"), ("collective", {"ranks": 0}, "ranks"),
    ("mismatch", {"scenario": "nope"}, "scenario"), ("mismatch", {"timeout": 1e9}, "timeout"),
    ("row-linear", {"tp": 3}, None), ("mlp", {"bogus": 1}, "bogus"), ("nonsense", {}, "example"),
])
def test_bad_options_raise_tpmatherror_naming_them(example, given, field):
    with pytest.raises(TPMathError) as info:
        ranks.plan(example, given)
    if field:
        assert field in str(info.value) or info.value.field == field


def test_tolerance_bound_shown_is_never_below_the_tolerance():
    for tol in np.geomspace(1e-16, 1e-1, 200):
        shown = fmt.within(0.0, tol)             # "< 3e−15"
        bound = float(shown[2:].replace("\u2212", "-"))
        assert bound >= tol * (1 - 1e-12), (tol, shown)
        assert bound <= tol * 10, (tol, shown)


def test_one_record_per_topic_drives_the_real_runner():
    """Each topic's record names options, plan, expected output and the torch module that runs it;
    the real runner's command line and dispatch come from it, and every named module exists."""
    import importlib.util

    from tpmath.real.__main__ import build_parser
    sub = next(a for a in build_parser()._actions if a.dest == "example")
    assert list(sub.choices) == list(ranks.TOPICS)
    for name, topic in ranks.TOPICS.items():
        assert topic.name == name and topic.options and callable(topic.plan) and callable(topic.expected)
        assert importlib.util.find_spec(f"tpmath.real.{topic.real_module}") is not None, topic.real_module
        given = {o.dest for o in topic.options}
        parsed = {a.dest for a in sub.choices[name]._actions} - {"help", "backend", "json"}
        assert parsed == given


@pytest.mark.parametrize("lang, ok, bad", [
    ("en", "<\u00a01e\u221215 (tolerance 7.0e\u221212) \u2713", "3.1e\u22123 (tolerance 7.0e\u221212) \u2717"),
    ("zh", "<\u00a01e\u221215\uff08\u5bb9\u5dee 7.0e\u221212\uff09\u2713", "3.1e\u22123\uff08\u5bb9\u5dee 7.0e\u221212\uff09\u2717"),
])
def test_a_check_line_prints_the_measured_difference_with_the_tolerance_beside_it(lang, ok, bad):
    """Issue 25 item 5: the real-ranks check printed "< 8e−12 ✓", the tolerance, not the difference."""
    from tpmath.ranks.output import verdict
    assert i18n.text(verdict(4.4e-16, 7e-12), lang) == ok
    assert i18n.text(verdict(3.1e-3, 7e-12), lang) == bad


def test_the_check_block_shows_each_measured_error_of_the_core():
    """Each check line's number is the max |TP − one process| of its result (measured here from the
    sharded run and a tp = 1 run), whatever its tolerance: with a mistake some are large, some noise."""
    from tpmath import attention as att
    p = ranks.plan("attention", {"mistake": "scale-local-width"})
    _, check = ranks.expected(p)
    c = p["cfg"]
    res = att.run_attention(c.tp, c.heads, c.kv_heads, c.seq, c.batch, c.hidden, 0, c.causal, c.mistake)
    one = att.run_attention(1, c.heads, c.kv_heads, c.seq, c.batch, c.hidden, 0, c.causal)
    for name, cell in check:
        key = i18n.text(name).split()[-1]
        independent = float(np.max(np.abs(np.asarray(getattr(res.sharded, key)) - np.asarray(getattr(one.sharded, key)))))
        assert i18n.text(cell).startswith(fmt.err(independent) + " "), (key, i18n.text(cell), independent)
