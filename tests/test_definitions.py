"""Terms defined before use (issue 27): the glossary's [[term.track]] records, the Markdown
``[text]{dfn=ID}`` and what the build refuses.  benchmarks/reading.py measures the pages with
them (tests/test_reading.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tpsite import glossary, markdown_ext
from tpsite.build import build
from tpsite.errors import BuildError

ROOT = Path(__file__).resolve().parents[1]
CONTENT = ROOT / "content"
TRACKED = glossary.tracked(glossary.load(CONTENT / "i18n"))


def test_the_terms_of_the_issue_are_tracked_in_both_languages():
    assert {"rank", "shard", "tp", "allreduce", "allgather", "reducescatter", "f", "f-bar", "g", "g-bar"} <= \
        {t.id for t in TRACKED}
    assert all(t.spellings.get("en") and t.spellings.get("zh") for t in TRACKED)


def test_a_definition_is_a_dfn_with_its_anchor():
    html, _ = markdown_ext.to_html("A [*rank*]{dfn=rank} is one process; [AllReduce](#dfn-allreduce) "
                                   "sums.\n\n`[a]{dfn=b}` stays code.", "#")
    assert '<dfn id="dfn-rank"><em>rank</em></dfn> is one process' in html
    assert '<a href="#dfn-allreduce">AllReduce</a>' in html
    assert "<code>[a]{dfn=b}</code>" in html and markdown_ext.dfn_ids(html) == ["rank"]


@pytest.mark.parametrize("toml, message", [
    ('[[term]]\nen = "a"\nzh = "a"\n[[term.track]]\nid = "Bad id"\nen = ["a"]\n', "needs an 'id'"),
    ('[[term]]\nen = "a"\nzh = "a"\n[[term.track]]\nid = "a"\nen = []\n', "list of spellings"),
    ('[[term]]\nen = "a"\nzh = "a"\n[[term.track]]\nid = "a"\nen = ["a"]\n'
     '[[term]]\nen = "b"\nzh = "b"\n[[term.track]]\nid = "a"\nen = ["b"]\n', "used twice"),
])
def test_the_glossary_refuses_a_bad_tracked_term(tmp_path, toml, message):
    (tmp_path / glossary.FILE).write_text(toml, encoding="utf-8")
    with pytest.raises(BuildError, match=message):
        glossary.load(tmp_path)


@pytest.mark.parametrize("line, message", [
    ("A [rank]{dfn=no-such-term} here.", "not a tracked term"),
    ("A [rank]{dfn=rank} again.", "two definitions"),          # page 1 already defines rank
])
def test_the_build_refuses_an_unknown_or_second_definition(tmp_path, line, message):
    content = tmp_path / "content"
    shutil.copytree(CONTENT, content)
    page = content / "en" / "index.md"
    page.write_text(page.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    with pytest.raises(BuildError, match=message) as err:
        build(tmp_path / "site", content_dir=content, runtime="none", quiet=True)
    assert "index.md" in str(err.value)


def test_a_formula_defined_alone_is_glued_to_its_punctuation():
    """Chromium may start a line with the "." after an inline formula (mathml.py): a formula that
    is a whole definition is glued with its <dfn>, not inside it."""
    from tpsite import mathml
    out = mathml.restore('<p>operator <dfn id="dfn-f">MXTPMATH00000Z</dfn>. And <dfn id="dfn-g">MXTPMATH00000Z, '
                         'then</dfn></p>', ['<math display="inline"><mi>f</mi></math>'])
    assert '<span class="nobr"><dfn id="dfn-f"><math display="inline"><mi>f</mi></math></dfn>.</span>' in out
    assert '<dfn id="dfn-g"><span class="nobr"><math display="inline"><mi>f</mi></math>,</span> then</dfn>' in out
