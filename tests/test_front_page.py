"""The front page's map of the book agrees with what the book contains.

book/chapter-path.svg (drawn by hand) shows every chapter of DESIGN.md's table, each marked
"available" or "planned"; a chapter is available exactly when _toc.yml lists it. The intro's
table links every available chapter.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

import yaml

from .conftest import ROOT

SVG = ROOT / "book" / "chapter-path.svg"
NS = {"svg": "http://www.w3.org/2000/svg"}
ALL_CHAPTERS = [f"{n:02d}" for n in range(1, 11)]


def _toc_chapters() -> dict[str, str]:
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    files = []

    def walk(entries):
        for entry in entries or []:
            files.append(entry.get("file", ""))
            walk(entry.get("sections"))

    walk(toc.get("chapters"))
    for part in toc.get("parts") or []:
        walk(part.get("chapters"))
    return {m.group(1): f for f in files if (m := re.match(r"book/(\d\d)_", f))}


def _svg_chapters() -> dict[str, str]:
    root = ET.parse(SVG).getroot()
    out = {}
    for group in root.iter("{http://www.w3.org/2000/svg}g"):
        if (group.get("id") or "").startswith("ch"):
            classes = group.get("class", "").split()
            status = next(c for c in classes if c in {"available", "planned"})
            words = [t.text for t in group.iter("{http://www.w3.org/2000/svg}text")]
            assert status in words, f"{group.get('id')}: class {status!r} but its label says {words}"
            out[group.get("id")[2:]] = status
    return out


def test_chapter_path_lists_every_chapter_and_marks_the_written_ones():
    svg, toc = _svg_chapters(), _toc_chapters()
    assert sorted(svg) == ALL_CHAPTERS, "book/chapter-path.svg should show chapters 01-10"
    available = {nn for nn, status in svg.items() if status == "available"}
    assert available == set(toc), (
        f"book/chapter-path.svg marks {sorted(available)} available, _toc.yml has {sorted(toc)}: "
        "in the SVG, change the chapter's group class and its status word to \"available\"")


def test_intro_links_every_chapter():
    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    for nn, doc in _toc_chapters().items():
        assert f"]({doc.removeprefix('book/')}.ipynb)" in intro, f"book/intro.md's table should link {doc}"
