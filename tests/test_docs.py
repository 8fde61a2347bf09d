"""The README and the guides in docs/ as a reader meets them on GitHub: every relative link and
image resolves (a #anchor to a heading, by GitHub's slug rules), the README stays short, and its
pages table lists every page registered in ui/pages.py.

Read from the Markdown text, so a renamed heading, a moved guide or a new page fails here with
the place named.
"""

from __future__ import annotations

import re
import sys
import unicodedata
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

from ui.pages import PAGES

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
GUIDES = sorted((ROOT / "docs").glob("*.md"))
DOCUMENTS = [README, *GUIDES]
MAX_README_LINES = 200
PAGES_HEADING = "## The pages"

FENCE = re.compile(r"^\s*(```|~~~)")
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target) and ![alt](target), the target up to whitespace or ")" (an optional "title").
INLINE_LINK = re.compile(
    r"(!?)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)"
)
REFERENCE_DEFINITION = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HTML_SOURCE = re.compile(r"<(?:img|a)\b[^>]*?\b(src|href)=\"([^\"]+)\"", re.IGNORECASE)
HTML_ANCHOR = re.compile(r"<a\b[^>]*?\b(?:id|name)=\"([^\"]+)\"", re.IGNORECASE)
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def prose_lines(text: str, *, code: bool = False) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, inline code spans blanked out unless
    `code` (a heading keeps its code's text in its anchor)."""
    lines, fenced = [], False
    for number, line in enumerate(text.splitlines(), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            lines.append((number, line if code else CODE_SPAN.sub(_blank, line)))
    return lines


def _blank(span: re.Match) -> str:
    return " " * len(span.group(0))


def heading_text(markdown: str) -> str:
    """A heading as GitHub renders it: links by their text, no emphasis or code markers."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", markdown)
    text = re.sub(r"<[^>]+>", "", text)
    return text.replace("`", "").replace("**", "").replace("__", "").replace("*", "")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading (github-slugger): lower case, letters, digits, "-" and "_"
    kept, every other character dropped, each space a "-" (so "a — b" is "a--b")."""
    kept = []
    for char in heading_text(heading).strip().lower():
        category = unicodedata.category(char)
        if char in "-_" or category.startswith("L") or category == "Nd":
            kept.append(char)
        elif char == " ":
            kept.append("-")
    return "".join(kept)


def anchors(path: Path) -> set[str]:
    """Every #anchor a link into `path` may name: its headings' slugs (a repeated heading's
    second slug ends "-1", as GitHub numbers them) and explicit `<a id=...>`."""
    found, seen = set(), {}
    text = path.read_text()
    for _, line in prose_lines(text, code=True):
        if match := HEADING.match(line):
            base = slug(match.group(2))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    found.update(HTML_ANCHOR.findall(text))
    return found


def links(path: Path) -> list[tuple[int, str, bool]]:
    """(line, target, is an image) for every link and image in `path`, code left out."""
    found = []
    for number, line in prose_lines(path.read_text()):
        for bang, _, target in INLINE_LINK.findall(line):
            found.append((number, target, bang == "!"))
        if match := REFERENCE_DEFINITION.match(line):
            found.append((number, match.group(1), False))
        for attribute, target in HTML_SOURCE.findall(line):
            found.append((number, target, attribute.lower() == "src"))
    return found


def broken_links(path: Path) -> list[str]:
    """Each relative link or image in `path` whose file, folder or #anchor does not exist."""
    broken = []
    for number, target, image in links(path):
        place = f"{path.relative_to(ROOT)}:{number} {target!r}"
        parts = urlsplit(target)
        if parts.scheme or parts.netloc:  # http(s), mailto: not checked offline
            continue
        if not target:
            broken.append(f"{place}: an empty link")
            continue
        file_part = unquote(parts.path)
        if file_part.startswith("/"):  # GitHub resolves "/x" from the repository's root
            resolved = ROOT / file_part.lstrip("/")
        else:
            resolved = (path.parent / file_part) if file_part else path
        if not resolved.exists():
            broken.append(f"{place}: no such {'image' if image else 'file'}")
            continue
        if image and not resolved.is_file():
            broken.append(f"{place}: an image must be a file")
            continue
        if parts.fragment:
            if resolved.suffix != ".md" or not resolved.is_file():
                broken.append(f"{place}: an #anchor into something that is not a Markdown file")
            elif unquote(parts.fragment) not in anchors(resolved):
                broken.append(f"{place}: no heading with that anchor in {resolved.name}")
    return broken


def pages_table(text: str) -> dict[str, str]:
    """The README's pages table: {page title: its link's path}, from the rows under
    "## The pages" (first column the title, second the path in backticks)."""
    lines = text.splitlines()
    assert PAGES_HEADING in lines, f"the README has no {PAGES_HEADING!r} section"
    rows = {}
    for line in lines[lines.index(PAGES_HEADING) + 1 :]:
        if line.startswith("#"):
            break
        if not line.startswith("|"):
            continue
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        path = re.search(r"`(/[^`]*)`", cells[1]) if len(cells) > 1 else None
        if path is None or set(cells[0]) <= set("-: "):
            continue  # the header row and the rule under it
        rows[heading_text(cells[0]).strip()] = path.group(1)
    return rows


def link_path(url_path: str, default: bool) -> str:
    """Where a page is reached: the app's root for the default page, else /<url_path>."""
    return "/" if default else f"/{url_path}"


# -- the documents ---------------------------------------------------------------------------------


def test_the_guides_exist():
    names = {path.name for path in GUIDES}
    assert {"teaching.md", "serving.md", "models.md", "architecture.md",
            "accessibility.md"} <= names  # fmt: skip


@pytest.mark.parametrize("path", DOCUMENTS, ids=[p.name for p in DOCUMENTS])
def test_every_relative_link_and_image_resolves(path):
    assert broken_links(path) == []


def test_the_readme_links_every_guide_and_shows_an_image():
    targets = {target.split("#")[0] for _, target, _ in links(README)}
    assert {f"docs/{path.name}" for path in GUIDES} <= targets
    images = [target for _, target, image in links(README) if image]
    assert images, "the README shows the app"


def test_the_readme_is_read_in_a_few_minutes():
    lines = len(README.read_text().splitlines())
    assert lines <= MAX_README_LINES, f"README.md has {lines} lines"


def test_the_readme_pages_table_lists_every_registered_page():
    expected = {record.title: link_path(record.url_path, record.default) for record in PAGES}
    assert pages_table(README.read_text()) == expected


# -- the checks themselves -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("heading", "anchor"),
    [
        ("Serving a room", "serving-a-room"),
        ("One figure, from the link to the screen", "one-figure-from-the-link-to-the-screen"),
        ("`make serve`: workers behind HAProxy", "make-serve-workers-behind-haproxy"),
        ("Q, K and V — the inputs", "q-k-and-v--the-inputs"),
        ("ATTENTION_EXPLORER_MODELS, the list", "attention_explorer_models-the-list"),
        ("Adding a page (**3 steps**)", "adding-a-page-3-steps"),
        ("[Links](x.md) and √d_k", "links-and-d_k"),
    ],
)
def test_heading_slugs_follow_github(heading, anchor):
    assert slug(heading) == anchor


def test_a_missing_file_anchor_or_image_is_reported(tmp_path, monkeypatch):
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "guide.md").write_text(
        "# Guide\n\n## Set up\n\n## Set up\n\n## `make serve`: workers\n\n"
        "```\n# not a heading\n```\n"
    )
    (tmp_path / "docs" / "shot.png").write_bytes(b"png")
    readme = tmp_path / "README.md"
    readme.write_text(
        "# Title\n\n![shot](docs/shot.png) ![gone](docs/gone.png)\n"
        "[ok](docs/guide.md#set-up-1) [anchor](docs/guide.md#tear-down) [file](docs/none.md)\n"
        "[here](#title) [web](https://example.com/x.md) `[code](nowhere.md)`\n"
        "[serve](docs/guide.md#make-serve-workers) [comment](docs/guide.md#not-a-heading)\n"
        '<img src="docs/missing.png" alt="">\n\n```\n[fenced](nowhere.md)\n```\n'
    )
    assert broken_links(readme) == [
        "README.md:3 'docs/gone.png': no such image",
        "README.md:4 'docs/guide.md#tear-down': no heading with that anchor in guide.md",
        "README.md:4 'docs/none.md': no such file",
        "README.md:6 'docs/guide.md#not-a-heading': no heading with that anchor in guide.md",
        "README.md:7 'docs/missing.png': no such image",
    ]


def test_the_pages_table_is_read_by_title_and_path():
    text = (
        "# App\n\n## The pages\n\n| Page | Link | What |\n| --- | --- | --- |\n"
        "| Why attention? | `/` | the idea |\n| Masking lab | `/masking` (`?causal=1`) | masks |\n"
        "\n## Next\n\n| Other | `/other` | not in the table |\n"
    )
    assert pages_table(text) == {"Why attention?": "/", "Masking lab": "/masking"}
    assert link_path("why", True) == "/" and link_path("long-context", False) == "/long-context"
