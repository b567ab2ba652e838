"""The glossary (content/i18n/glossary.toml): one term per concept, checked by the build, shown
on the pages (issue 25, item 18)."""

from __future__ import annotations

import html
import json
import re
import shutil
from pathlib import Path

import pytest

from tpsite import glossary
from tpsite.content import load_content
from tpsite.errors import BuildError

ROOT = Path(__file__).resolve().parents[1]
CONTENT = ROOT / "content"
TERMS = glossary.load(CONTENT / "i18n")


@pytest.fixture(scope="module")
def site(static_site) -> Path:
    return static_site          # conftest.py: one --runtime none build of the real content per run


def copy_content(tmp_path: Path) -> Path:
    dst = tmp_path / "content"
    shutil.copytree(CONTENT, dst)
    return dst


def test_the_glossary_has_the_terms_of_the_issue():
    forbidden = {v for t in TERMS for v in t.forbid.get("zh", ())}
    assert {"填充", "label smoothing", "本地", "损失", "id", "集合操作", "规约", "batch 大小", "隐藏层大小", "参考文献",
            "未分片基线", "卡数（tp）", "TP 规模", "rank 数 t", "张量并行规模", "错误示范", "块 GPU"} <= forbidden
    chosen = {t.zh for t in TERMS}
    assert {"补齐（padding）", "集合通信", "归约", "loss", "批大小（batch size）", "隐藏维度", "参考资料", "未分片参考",
            "错误示例", "TP 大小"} <= chosen


@pytest.mark.parametrize("where, text", [
    ("zh/index.md", "词表按 128 的倍数填充。"),
    ("i18n/zh.figvocab.toml", "本地最大值"),
    ("i18n/zh.toml", "集合操作"),
    ("i18n/zh.errors.toml", "label smoothing ε"),
    ("demos/zh/row_parallel.py", "# 损失 = Σ Y⊙G"),
    ("zh/row-parallel.md", "目标 token id 为 3。"),
    ("zh/sequence-parallel.md", "每块 GPU 只保留自己的 token。"),     # GPUs are counted with 张
    ("i18n/zh.errors.toml", "两块 GPU"),
])
def test_the_build_refuses_a_forbidden_variant_naming_file_and_line(tmp_path, where, text):
    content = copy_content(tmp_path)
    path = content / where
    lines = path.read_text(encoding="utf-8").splitlines()
    if where.endswith(".toml"):          # into the value of an existing string: the keys stay the same
        at = next(i for i, line in enumerate(lines) if re.match(r'^\w+ = "', line))
        key, value = lines[at].split(" = ", 1)
        lines[at] = f'{key} = "{text}{value[1:]}'
    else:
        at = 7
        lines.insert(at, text)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(BuildError) as err:
        load_content(content)
    assert f"{where}:{at + 1}:" in str(err.value), str(err.value)
    assert "glossary" in str(err.value)


def test_allowed_strings_and_other_words_are_not_refused(tmp_path):
    content = copy_content(tmp_path)
    path = content / "zh" / "index.md"
    path.write_text(path.read_text(encoding="utf-8") + "\n标签平滑（label smoothing）、hidden、ids、"
                    '<span id="x">x</span>、micro-batch 大小。\n', encoding="utf-8")
    load_content(content)


def test_the_english_pages_may_use_every_word():
    """The rules are per language: "padding", "loss", "id" are the English pages' own words."""
    assert glossary.problems(CONTENT, TERMS, ("en",)) == []


def _zh_texts(site: Path):
    """(file, text) of everything a reader of the Chinese pages sees: page text (prose, tables,
    figures, controls, the real-ranks blocks) and the language's strings file (messages, errors)."""
    for page in sorted((site / "zh").glob("*.html")):
        source = page.read_text(encoding="utf-8")
        # the glossary's own columns of English terms and of variants not to use are the one place
        # they appear
        source = re.sub(r'<td class="prose glossary-avoid"[^>]*>.*?</td>|<th scope="row" lang="en"[^>]*>.*?</th>', "", source)
        source = re.sub(r"<(script|style)\b.*?</\1>", "", source, flags=re.S)
        text = html.unescape(re.sub(r"<[^>]+>", "\n", source))
        yield page.name, text
    for strings in sorted((site / "static" / "i18n").glob("zh.*.json")):
        yield strings.name, "\n".join(json.loads(strings.read_text(encoding="utf-8")).values())


def test_the_built_chinese_site_uses_no_forbidden_variant(site):
    rules = [(t, v) for t in TERMS for v in t.forbid.get("zh", ())]
    allowed = [a for t in TERMS for a in t.allow.get("zh", ())]
    found, seen = [], 0
    for name, text in _zh_texts(site):
        seen += 1
        for line in text.splitlines():
            for a in allowed:
                line = line.replace(a, " ")
            found += [(name, v, line.strip()[:80]) for _, v in rules if glossary._found(v, line)]
    assert seen > 4 and found == []


def test_the_glossary_table_is_on_the_first_page_in_both_languages(site):
    from html_tree import parse
    for lang, title in (("en", "Glossary (English–Chinese)"), ("zh", "中英术语对照表")):
        tree = parse((site / lang / "index.html").read_text(encoding="utf-8"))
        heading = tree.find("h2", id="glossary")
        assert heading is not None and heading.text() == title
        table = tree.find("table", data_table="glossary")
        rows = table.find("tbody").find_all("tr")
        assert [(r.find("th").text(), r.find("td").text()) for r in rows] == [(t.en, t.zh) for t in TERMS]
        padding = next(r for r in rows if r.find("th").text() == "padding")
        assert padding.find("td", class_="prose glossary-avoid").text() == "填充"
        for page in sorted((site / lang).glob("*.html")):
            footer = parse(page.read_text(encoding="utf-8")).find("footer")
            assert any(a.attrs.get("href") == "index.html#glossary" and a.text() == title
                       for a in footer.find_all("a")), page
