"""Every page is readable where its readers are: a phone (390 × 844) upright and turned, a laptop
(1280 × 800) and a projector in presenter mode (1280 × 720), measured as a reader sees it in
Chromium (issue #51).

For each registered page (ui/pages.py's list, so a new page is covered without touching this
file) and each screen, in its default view and in the densest view a link can ask it for, the
page's drawn text is read back from the browser, with every expander open and each tab chosen in
turn:

- labels of one chart (Plotly's SVG text, or any other SVG picture's) whose boxes overlap, and
  a chart's labels lying on the map of another panel of the same chart;
- chart or diagram text drawn under MIN_TEXT_PX high (its font size on screen);
- anything wider than the screen that is not inside a region made to scroll sideways (a
  table, a formula, a focusable scroll region), and chart text cut off at its chart's edge.

All three must be empty; and on the phone, every table that scrolls sideways keeps its first
column in view when scrolled to its right end.
"""

from __future__ import annotations

from collections import Counter
from urllib.parse import quote

import pytest

from harness.app_pages import registered_pages
from harness.browser import (
    exceptions,
    new_tab,
    open_app,
    wait_for_app_run,
    wait_for_visible_charts,
)
from ui.widgets.small_screens import CHART_TEXT_JS

PAGES = registered_pages()
# name: (viewport, query)
SCREENS = {
    "phone": ((390, 844), ""),
    # Turned, a phone is wider than Streamlit's 640 px for stacking columns, and its sidebar opens.
    "turned-phone": ((844, 390), ""),
    "laptop": ((1280, 800), ""),
    "projector": ((1280, 720), "present=1"),
}
MIN_TEXT_PX = 7
# Boxes that share less than this (px, in both directions) only touch: glyph boxes include the
# line's leading, so neighbouring lines of one label may graze each other.
OVERLAP_PX = 1.5
MAX_SHOWN = 6  # findings of each kind written out in a failure

TWO_FRAMES_JS = "() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)))"

# Every chart's drawn text with its box on screen, its font size on screen and the panel it
# belongs to, and the boxes of each panel's map (a heatmap's image).
READ_JS = r"""([minText, overlapPx]) => {
  const shown = (el) => {
    const box = el.getBoundingClientRect();
    if (box.width <= 0 || box.height <= 0) return null;
    if (!el.checkVisibility({ opacityProperty: true, visibilityProperty: true })) return null;
    for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
      if (parseFloat(getComputedStyle(node).opacity) === 0) return null;
    }
    return box;
  };
  const fontPx = (el) => {
    const m = el.getScreenCTM();
    const scale = m ? Math.sqrt(Math.abs(m.a * m.d - m.b * m.c)) : 1;
    return parseFloat(getComputedStyle(el).fontSize) * scale;
  };
  const name = (chart) => (chart.closest('[aria-label]')?.getAttribute('aria-label')
    || chart.getAttribute('aria-label') || chart.tagName).slice(0, 50);
  const charts = [...document.querySelectorAll('.js-plotly-plot')]
    .filter((chart) => !chart.closest('.st-key-plotly_preload'));
  const pictures = [...document.querySelectorAll('svg')].filter((svg) =>
    !svg.closest('.js-plotly-plot') && !svg.parentElement.closest('svg')
    && svg.querySelector('text'));
  const overlaps = [], tiny = [], cut = [];
  for (const chart of [...charts, ...pictures]) {
    if (chart.getClientRects().length === 0) continue;  // in a closed expander or tab
    const labels = [];
    const frame = (chart.querySelector('.main-svg') || chart).getBoundingClientRect();
    for (const text of chart.querySelectorAll('text')) {
      if (text.closest('.hoverlayer, .modebar, defs')) continue;
      // A line inside a label (tspan) belongs to that label; text nested in text is skipped.
      if (text.parentElement.closest('text')) continue;
      const content = text.textContent.trim();
      if (!content) continue;
      const box = shown(text);
      if (!box) continue;
      const px = fontPx(text);
      const panel = text.closest('g.subplot')?.getAttribute('class') ?? '';
      labels.push({ text: content, box, px, panel });
      // Past the edge of its chart's drawing, a label is cut off (Plotly does not wrap).
      if (box.left < frame.left - 1 || box.right > frame.right + 1) {
        cut.push({ element: `text cut off: ${content.slice(0, 30)}`, left: Math.round(box.left),
                   right: Math.round(box.right) });
      }
      if (px < minText) tiny.push({ chart: name(chart), text: content.slice(0, 30),
                                    px: Math.round(px * 10) / 10 });
    }
    const maps = [...chart.querySelectorAll('g.subplot g.hm image')].map((image) => ({
      box: image.getBoundingClientRect(),
      panel: image.closest('g.subplot').getAttribute('class'),
    }));
    const meet = (a, b) =>
      Math.min(a.right, b.right) - Math.max(a.left, b.left) > overlapPx
      && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > overlapPx;
    for (let i = 0; i < labels.length; i++) {
      for (let j = i + 1; j < labels.length; j++) {
        if (meet(labels[i].box, labels[j].box)) {
          overlaps.push({ chart: name(chart), a: labels[i].text.slice(0, 30),
                          b: labels[j].text.slice(0, 30) });
        }
      }
      for (const map of maps) {
        if (labels[i].panel && map.panel !== labels[i].panel && meet(labels[i].box, map.box)) {
          overlaps.push({ chart: name(chart), a: labels[i].text.slice(0, 30),
                          b: `the map of ${map.panel}` });
        }
      }
    }
  }
  // Wider than the screen: an element reaching past either side of the page's main area (the
  // sidebar, closed on a phone, is not read), unless held as below.
  const width = document.documentElement.clientWidth;
  const wide = [...cut];
  // Held: in a region that scrolls sideways, in one clipped to nothing (the 1 px box that
  // holds a slider's input for screen readers only), or in one that hides what passes its
  // edges and is itself on the screen (a progress bar's track, whose fill slides in from the
  // left).
  const holds = (node) => {
    const style = getComputedStyle(node);
    if (['hidden', 'clip'].includes(style.overflowX)) {
      const box = node.getBoundingClientRect();
      if (box.left >= -1 && box.right <= width + 1) return true;
    }
    return ['auto', 'scroll'].includes(style.overflowX)
      || style.clip !== 'auto' || style.clipPath !== 'none';
  };
  const main = document.querySelector("[data-testid='stMain']");
  for (const el of main.querySelectorAll('*')) {
    if (el.parentElement.closest('svg')) continue;  // a picture is measured as one box
    const box = el.getBoundingClientRect();
    if (box.width === 0 || (box.right <= width + 1 && box.left >= -1)) continue;
    let held = false;
    for (let node = el.parentElement; node && node !== main; node = node.parentElement) {
      if (holds(node)) { held = true; break; }
    }
    if (held || !el.checkVisibility({ opacityProperty: true, visibilityProperty: true })) continue;
    const testid = el.closest('[data-testid]')?.getAttribute('data-testid') ?? '';
    wide.push({ element: `${el.tagName.toLowerCase()} in ${testid}`,
                left: Math.round(box.left), right: Math.round(box.right) });
  }
  const page = document.documentElement.scrollWidth > width + 1
    || main.scrollWidth > main.clientWidth + 1;
  if (page) wide.push({ element: 'the page scrolls sideways', left: 0,
                        right: Math.max(document.documentElement.scrollWidth, main.scrollWidth) });
  return { overlaps, tiny, wide };
}"""


# Every table that scrolls sideways, scrolled to its right end: is its first column in view?
# (Streamlit's grid draws on a canvas and keeps an accessible table of the cells it draws.)
TABLES_JS = """async () => {
  const lost = [];
  const grids = "[data-testid='stMain'] [data-testid='stDataFrame']";
  for (const grid of document.querySelectorAll(grids)) {
    const scroller = grid.querySelector('.dvn-scroller');
    if (!scroller || scroller.scrollWidth <= scroller.clientWidth + 1) continue;
    scroller.scrollLeft = scroller.scrollWidth;
    await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
    if (!grid.querySelector("table thead [aria-colindex='1']")) {
      const heads = [...grid.querySelectorAll('table thead th')];
      lost.push(heads.map((th) => th.textContent).join(' | '));
    }
    scroller.scrollLeft = 0;
  }
  return lost;
}"""


def read_screen(tab) -> dict:
    """What a reader of the open page sees wrong: overlapping labels, tiny text, overflow."""
    # Every chart drawn, including those below the fold: scroll down the page once.
    tab.evaluate(
        """async () => {
        const main = document.querySelector("[data-testid='stMain']");
        for (let y = 0; y < main.scrollHeight; y += main.clientHeight) {
            main.scrollTo(0, y);
            await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
        }
        main.scrollTo(0, 0);
    }"""
    )
    wait_for_visible_charts(tab)
    tab.evaluate(TWO_FRAMES_JS)
    return tab.evaluate(READ_JS, [MIN_TEXT_PX, OVERLAP_PX])


def read_everything(tab) -> dict:
    """`read_screen` with every expander open, then again with each other tab of every set of
    tabs chosen: a reader opens them, and charts in them are drawn at the width they open to."""
    opened = tab.evaluate(
        """() => {
        const closed = "[data-testid='stExpander'] details:not([open]) > summary";
        const summaries = [...document.querySelectorAll(`[data-testid='stMain'] ${closed}`)];
        summaries.forEach((summary) => summary.click());
        return summaries.length;
    }"""
    )
    if opened:  # an expander bound to the link reruns the page
        wait_for_app_run(tab)
    seen = read_screen(tab)
    choices = tab.locator("[data-testid='stMain'] [role='tab']")
    for n in range(choices.count()):
        if choices.nth(n).get_attribute("aria-selected") == "true":
            continue
        choices.nth(n).click()
        for what, found in read_screen(tab).items():
            seen[what] += found
    return seen


@pytest.fixture(scope="module")
def screen_tabs(browser):
    """One tab per screen, reused page after page (a fresh session each `goto`)."""
    tabs = {}

    def tab_for(screen: str):
        if screen not in tabs:
            (width, height), _ = SCREENS[screen]
            tabs[screen] = new_tab(browser, width=width, height=height)
        return tabs[screen]

    yield tab_for
    for tab in tabs.values():
        tab.context.close()


@pytest.mark.e2e
@pytest.mark.parametrize("record", PAGES, ids=[p.url_path for p in PAGES])
@pytest.mark.parametrize("screen", list(SCREENS))
def test_every_chart_is_readable_on_the_screen(server, screen_tabs, screen, record):
    _, query = SCREENS[screen]
    tab = screen_tabs(screen)
    open_app(tab, server.url, "" if record.default else record.url_path, query)
    wait_for_visible_charts(tab)
    assert exceptions(tab) == []

    seen = read_everything(tab)
    where = f"/{record.url_path} on the {screen}"
    if screen == "phone":
        seen["tables"] = tab.evaluate(TABLES_JS)
    counts = {what: len(found) for what, found in seen.items()}
    assert not any(counts.values()), f"{where}: {counts}\n" + report(seen)


# The densest views a link can ask each page for: the most tokens, the longest words, the most
# heads and positions. A page's default view is not where its labels crowd.
LONG_WORDS = (
    "Internationalization representatives misunderstood the extraordinarily complicated "
    "telecommunications regulations, so the administrators reconsidered their "
    "recommendations and unanimously postponed the implementation indefinitely."
)
DENSE_LINKS = {
    "scaled-dot-product": "preset=random&n_q=16&n_k=16&d_k=32&d_v=32&causal=1",
    "masking": "n=8",
    "multi-head": "source=count&n=12&d_model=64&heads=16&attention=cross&n_kv=12",
    "positional": "positions=2048&width=16&base=500000",
    "pretrained": "text=" + quote(LONG_WORDS),
    "probe": "text=" + quote(LONG_WORDS),
    "decoder": "prompt=" + quote(LONG_WORDS),
    "heads": "prompt=" + quote(LONG_WORDS),
    "cost": "keys=12&block=1&decode=12",
    "learning": "layers=3&heads=8&d_model=128&vocab=256&context=64&steps=25&batch=8",
    "why": "n=10",
    "long-context": "text=" + quote(" ".join([LONG_WORDS] * 4))
    + "&window=4&sinks=3&context=131072",
    "patching": "blocks=1&clean="
    + quote("When the administrators and the representatives went to the conference, the "
            "administrators gave a telecommunications report to")
    + "&corrupt="
    + quote("When the administrators and the representatives went to the conference, the "
            "representatives gave a telecommunications report to"),
}  # fmt: skip


@pytest.mark.e2e
@pytest.mark.parametrize("path", list(DENSE_LINKS))
@pytest.mark.parametrize("screen", list(SCREENS))
def test_the_densest_views_are_readable_too(server, screen_tabs, screen, path):
    assert path in {record.url_path for record in PAGES}
    _, query = SCREENS[screen]
    tab = screen_tabs(screen)
    open_app(tab, server.url, path, "&".join(filter(None, (query, DENSE_LINKS[path]))))
    wait_for_visible_charts(tab)
    assert exceptions(tab) == []

    seen = read_everything(tab)
    counts = {what: len(found) for what, found in seen.items()}
    assert not any(counts.values()), f"/{path} (dense) on the {screen}: {counts}\n" + report(seen)


@pytest.mark.e2e
def test_charts_drawn_before_the_thinning_starts_are_thinned_when_it_does(server, screen_tabs):
    """The thinning script arrives with the sidebar; on a page whose figures are cached and
    whose Plotly is loaded, charts can be drawn before it starts watching."""
    tab = screen_tabs("laptop")
    open_app(tab, server.url, "positional", DENSE_LINKS["positional"])
    wait_for_visible_charts(tab)
    tab.evaluate(
        """() => {
        for (const text of document.querySelectorAll('[data-thinned]')) {
            text.style.display = ''; delete text.dataset.thinned;
        }
        window.__chartText = false;
    }"""
    )
    assert read_screen(tab)["overlaps"], "this view's labels need thinning"

    script = CHART_TEXT_JS.strip().removeprefix("<script>").removesuffix("</script>")
    tab.evaluate(f"() => {{ {script} }}")
    assert read_screen(tab)["overlaps"] == []


def report(seen: dict) -> str:
    """Each kind of finding by chart (how many), then the first few written out."""
    lines = []
    for what, found in seen.items():
        if found:
            by_chart = Counter(item.get("chart", item.get("element")) for item in found)
            lines.append(f"  {what} by chart: {dict(by_chart)}")
            lines.append(f"  {what}, first {MAX_SHOWN}: {found[:MAX_SHOWN]}")
    return "\n".join(lines)
