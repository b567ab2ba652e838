"""What the real ranks print, in the reader's language (issue 25, item 17).

``python -m tpmath.real … --lang zh`` and the Chinese pages' real-ranks blocks print the same
records as the English run: the same numbers in the same places, every label with words in it
translated (content/i18n/<lang>.core.toml ``real.*``), notation (``W1[:, 0:2]``,
``Y ← all_reduce(SUM)``) unchanged; the page's command carries ``--lang zh``.
"""

from __future__ import annotations

import re

import pytest

from tpmath import mismatch, ranks, views

# Words that are notation, not English: tensor and collective names, dtypes, the rank prefix.
NOTATION = {"rank", "all", "reduce", "gather", "scatter", "broadcast", "SUM", "MAX", "MIN", "AVG", "PRODUCT",
            "op", "src", "dst", "softmax", "exp", "loss", "dL", "dz", "dX", "dY", "dA", "db", "LN", "MLP",
            "partial", "shard", "float", "int", "dropout", "dtype", "gamma", "beta", "into", "tensor", "single",
            "barrier", "to", "NaN", "PyTorch", "max", "e", "token", "ID"}
NUMBER = re.compile(r"[−-]?\d+(?:\.\d+)?(?:e[−-]?\d+)?")


def cases():
    """(example, options): every example on its defaults, the page's real-ranks blocks at their
    defaults, and settings whose records differ (padding, GQA sums, mistakes, masks, hangs)."""
    out = [(name, {}) for name in ranks.TOPICS]
    for name, sec in views.sections().items():
        if sec.real is not None:
            out += sec.real(views.render(name)["controls"])
    out += [("vocab-ce", {"shards": 4}), ("vocab-ce", {"label_smoothing": 0.1}),
            ("vocab-ce", {"target": "[-100]", "logits": "[[1,2,3,4]]"}),
            ("collective", {"name": "reduce", "root": 1}), ("collective", {"name": "all-reduce", "op": "prod"}),
            ("attention", {"kv_heads": 1}), ("layer", {"kv_heads": 1}),
            ("sp-layer", {"dropout": 0.1, "mistake": "gather-wrong-dim"}),
            ("sp-layer", {"mistake": "ln-grad-not-reduced"}),
            ("row-linear", {"bias": "[1,2,3,4]"}), ("column-linear", {"bias": "[1,2,3,4]"})]
    out += [("mismatch", {"scenario": s}) for s in mismatch.SCENARIOS]
    return out


def labels(output: str) -> list[str]:
    """Each line without its ``[rank r]`` prefix (labels and values: the words in either)."""
    return [line.split("] ", 1)[1] if "] " in line else line for line in output.splitlines()]


def english_words(text: str) -> set[str]:
    # "[:, 0:2]" slices, "W_q" names and "G_LN1" keep their letters apart from words
    return {w for w in re.findall(r"[A-Za-z]{2,}", text) if w not in NOTATION and not w.startswith(("W", "G"))}


@pytest.mark.parametrize("example, given", cases(), ids=lambda v: str(v))
def test_the_chinese_output_has_the_english_numbers_and_no_english_labels(example, given):
    en = ranks.expected_output(example, given, "en")
    zh = ranks.expected_output(example, given, "zh")
    assert NUMBER.findall(zh["output"]) == NUMBER.findall(en["output"])
    assert len(zh["output"].splitlines()) == len(en["output"].splitlines())
    left = {line: english_words(line) for line in labels(zh["output"]) if english_words(line)}
    assert left == {}
    # the English output does have words here (the check above would catch an untranslated one)
    assert any(english_words(line) for line in labels(en["output"]))
    assert zh["command"] == en["command"] + " --lang zh"
    assert "--lang" not in en["command"]


def test_an_untranslated_label_would_be_caught():
    """The word filter is not blind: the English labels the issue quotes count as English."""
    assert english_words("vs the unsharded reference (one process):")
    assert english_words("#0 all_reduce [4] float32 {0,1}  checker: never completes (order)")
    assert english_words("local max  1.2")


def test_the_sections_real_blocks_follow_the_page_language():
    for name, sec in views.sections().items():
        if sec.real is None:
            continue
        en, zh = views.render(name, lang="en")["real"], views.render(name, lang="zh")["real"]
        assert [b["command"] + " --lang zh" for b in en] == [b["command"] for b in zh], name
        assert [NUMBER.findall(b["output"]) for b in en] == [NUMBER.findall(b["output"]) for b in zh], name
        assert all(b["output"] != c["output"] for b, c in zip(en, zh)), name


def test_check_title_and_padding_count_cjk_as_two_columns():
    from tpmath.ranks.output import columns
    from tpmath.i18n import Text
    lines = ranks.format_rank(0, [(Text("real.local_max"), 1.0), ("m ← all_reduce(MAX)", 2.0)], lang="zh")
    assert [columns(line.rsplit("  ", 1)[0], "zh") for line in lines] == [columns(lines[1].rsplit("  ", 1)[0], "zh")] * 2
    assert columns("局部 ←", "zh") == 7 and columns("局部 ←", "en") == 6 and columns("Σ", "zh") == 1
    assert ranks.check_title("zh") != ranks.check_title("en")
