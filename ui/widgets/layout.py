"""The frame around every page: presenter mode, the page's opening lines, "what to try"."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlparse

import plotly.graph_objects as go
import streamlit as st

from ui.widgets import room
from ui.widgets.small_screens import CHART_TEXT_JS
from ui.widgets.state import FIGURE_FORMAT_KEY, PRESENT_KEY, TABLES_KEY, PageState, is_presenting

# Projectors wash out small, faint text: presenter mode enlarges everything (Streamlit sizes in
# rem) and shows captions at full opacity; the toolbar and deploy menu only distract an audience.
PRESENTER_CSS = """
<style>
html { font-size: 22px; }
[data-testid="stMainBlockContainer"] { max-width: 100%; padding-top: 2.5rem; }
[data-testid="stToolbar"] { display: none; }
[data-testid="stMarkdownContainer"] p, [data-testid="stMarkdownContainer"] li { line-height: 1.45; }
[data-testid="stCaptionContainer"] { font-size: 0.95rem; opacity: 1; }
.katex { font-size: 1.3em; }
</style>
"""


# While pages/ exists, a fresh server answers its first request in Streamlit's legacy mode: it
# misses our url_path among the pages/ file names, says "Page not found", then runs app.py, whose
# router finds the page after all. The dialog would greet the audience of a deep link on a slide,
# so it is closed, but only when the router really found the page that was asked for. When it
# shows varies with the server's load (a run training beside it, a dozen servers booting), and a
# run that drew this script can be replaced by another before the browser ran it: so every run
# of the session's first minute draws it again, and the first copy to run watches for a minute.
STALE_NOT_FOUND_S = 60
CLOSE_STALE_NOT_FOUND_JS = """
<script>
(() => {
  if (window.parent.closesStaleNotFound) return;
  window.parent.closesStaleNotFound = true;
  const deadline = Date.now() + STALE_NOT_FOUND_MS;
  const timer = setInterval(() => {
    for (const dialog of window.parent.document.querySelectorAll("[role='dialog']")) {
      if (dialog.textContent.includes("Page not found")) {
        const close = dialog.querySelector("button[aria-label='Close']");
        if (close) { close.click(); clearInterval(timer); return; }
      }
    }
    if (Date.now() > deadline) clearInterval(timer);
  }, 100);
})();
</script>
""".replace("STALE_NOT_FOUND_MS", str(STALE_NOT_FOUND_S * 1000))


# The link is read when the button is pressed, so it holds the view as it is at that moment.
COPY_LINK_HTML = """
<button id="copy-view-link" type="button" title="Copy a link that reopens exactly this view"
  style="width:100%;padding:0.4rem 0.6rem;border-radius:0.5rem;cursor:pointer;
         border:1px solid rgba(49,51,63,0.25);background:transparent;color:inherit;
         font:inherit;">Copy link to this view</button>
<script>
(() => {
  const button = document.getElementById("copy-view-link");
  if (!button || button.dataset.ready) return;
  button.dataset.ready = "1";
  button.addEventListener("click", async () => {
    // The speaker's secret (a room's `host`) stays in their own address bar, never in a copy.
    const url = new URL(window.location.href);
    url.searchParams.delete("host");
    const link = url.href;
    try {
      await navigator.clipboard.writeText(link);
      button.textContent = "Link copied";
    } catch (error) {
      window.prompt("Copy this link:", link);
    }
    setTimeout(() => { button.textContent = "Copy link to this view"; }, 2000);
  });
})();
</script>
"""


# Two repairs of what Streamlit draws, for screen readers and keyboards (axe-core checks both):
# - A sectioned menu is <ul><div><header/><li/>...</div>...</ul>: list items whose parent is
#   not a list (axe: `list`, `listitem`). Roles say what it is: a list of sections, each one
#   item holding its heading and links. Roles only, no moved nodes (React owns them).
# - A formula wider than its column scrolls sideways, and a region that scrolls must be
#   reachable by keyboard (axe: `scrollable-region-focusable`): such a formula, and only
#   such, becomes a tab stop, scrolled with the arrow keys.
# Both are reapplied, once per frame at most, whenever Streamlit redraws, the window resizes or
# a formula scrolled into view is drawn; a Tab key measures every formula, drawn or not.
A11Y_JS = """
<script>
(() => {
  if (window.__a11yRepairs) return;
  window.__a11yRepairs = true;
  const drawn = (formula) => {
    const content = formula.firstElementChild;
    return !content || typeof content.checkVisibility !== "function" ||
      content.checkVisibility({ contentVisibilityAuto: true });
  };
  const repair = (everyFormula = false) => {
    for (const menu of document.querySelectorAll("[data-testid='stSidebarNavItems']")) {
      for (const section of menu.children) {
        if (section.tagName === "LI" || section.getAttribute("role") === "listitem") continue;
        section.setAttribute("role", "listitem");
        for (const item of section.querySelectorAll(":scope > li")) {
          item.setAttribute("role", "none");
        }
      }
    }
    for (const formula of document.querySelectorAll(".katex-display")) {
      // Measuring a formula not yet drawn (out of view, BASE_CSS) would lay it out now, the
      // work its deferral saves; it is measured once drawn, or at a Tab key (below).
      if (!drawn(formula)) {
        if (!everyFormula) continue;
        formula.firstElementChild.getBoundingClientRect();  // lays out what is not drawn
      }
      const wide = formula.scrollWidth > formula.clientWidth;
      if (wide && !formula.hasAttribute("tabindex")) {
        formula.setAttribute("tabindex", "0");
        formula.setAttribute("role", "group");
        formula.setAttribute("aria-label", "Wide formula: scroll sideways with the arrow keys");
      } else if (!wide && formula.hasAttribute("tabindex")) {
        for (const name of ["tabindex", "role", "aria-label"]) formula.removeAttribute(name);
      }
    }
  };
  // Measuring a formula forces a layout of the page, so it waits for an idle moment and only
  // for changes that can bring a menu or a formula: not for the thousands of nodes a chart
  // adds while it draws, where measuring at each frame would slow the page's charts.
  const watched = "[data-testid='stSidebarNavItems'], .katex-display";
  const brings = (node) =>
    node.nodeType === 1 && !(node instanceof SVGElement) &&
    (node.matches(watched) || node.querySelector(watched) !== null);
  // Safari has no requestIdleCallback: a short timer stands in for it there.
  const whenIdle = (run) => window.requestIdleCallback
    ? window.requestIdleCallback(run, { timeout: 500 })
    : setTimeout(run, 100);
  let queued = false;
  const soon = () => {
    if (queued) return;
    queued = true;
    whenIdle(() => { queued = false; repair(); });
  };
  repair();
  new MutationObserver((changes) => {
    if (changes.some((change) => [...change.addedNodes].some(brings))) soon();
  }).observe(document.body, { childList: true, subtree: true });
  window.addEventListener("resize", soon);
  // A formula out of view is not laid out (BASE_CSS), so its width is known once it nears the
  // window; the event does not bubble, hence the capture.
  document.addEventListener("contentvisibilityautostatechange", soon, { capture: true });
  document.fonts.ready.then(soon);
  // Tab may move to a formula further down than any drawn yet: before the browser picks the
  // next stop, every formula is measured. Only keyboard users pay for that layout.
  document.addEventListener("keydown", (event) => {
    if (event.key === "Tab") repair(true);
  }, { capture: true });
})();
</script>
"""


BASE_CSS = """
<style>
/* The chart that only loads Plotly's script early (app_frame) is never shown. */
.st-key-plotly_preload { display: none; }
/* Streamlit stacks columns under 640 px only. Between that and a laptop (a turned phone beside
   its open sidebar, a tablet) three columns are 160 px wide, too narrow for the titles and
   labels a phone's 358 px chart fits: there, a column keeps a phone's width and the rest wrap. */
@media (max-width: 1000px) {
  [data-testid="stHorizontalBlock"] { flex-wrap: wrap; }
  [data-testid="stHorizontalBlock"] > [data-testid="stColumn"] { min-width: min(100%, 21rem); }
}
/* A display formula wraps like text at its top-level = + − signs (KaTeX draws each piece
   between them as one unbreakable box), so fewer formulas need to scroll sideways. A piece
   wider than its column (a written-out row of a real model's 32-wide head) still scrolls
   rather than being cut off, and A11Y_JS makes it a tab stop. The side padding holds the
   pixel or two a glyph reaches past KaTeX's box, which would otherwise scroll. */
.katex-display > .katex { white-space: normal; }
.katex-display { overflow-x: auto; overflow-y: hidden; padding: 0 0.2rem 0.2rem; }
.katex-display:focus-visible { outline: 2px solid currentColor; outline-offset: 2px; }
/* A formula out of view is laid out and painted only as it nears the window: a page's written-
   out calculations (the real-model page's step by step: ~7000 characters of TeX, below the
   fold) otherwise hold back its first chart. Find-in-page, screen readers and print still get
   all of it; a formula keeps its height once it has been drawn. Its box takes the column's
   width (st.latex centres a box as wide as its content, which is 0 until drawn), so a formula
   wider than the column is known as such, drawn or not. */
.katex-display { content-visibility: auto; contain-intrinsic-block-size: auto 3em; }
[data-testid="stMarkdown"] > div:has(> [data-testid="stMarkdownContainer"] > .katex-display),
[data-testid="stMarkdownContainer"]:has(> .katex-display) { width: 100%; }
@media print { .katex-display { content-visibility: visible; } }
/* Text in the primary colour misses WCAG AA's 4.5:1 in one theme or the other (the selected
   option of a segmented control on its own tint: 4.1:1 in light; a slider's value on the dark
   background: 3.9:1), so such text takes the theme's text colour; the control's frame, tint
   and thumb keep the primary colour. */
[data-testid="stButtonGroup"] button[data-selected="true"]:not([data-disabled]) {
  color: inherit;
  font-weight: 600;
}
[data-testid="stSlider"] [data-testid="stSliderThumbValue"] { color: inherit; }
/* Keyboard focus shows on every control. Streamlit draws none on the menu's links, a table's
   toolbar buttons or a table itself (its cells are a canvas); the blue keeps 3:1 against both
   themes' backgrounds (WCAG 2.4.7, 1.4.11). */
[data-testid="stSidebarNavLink"]:focus-visible,
[data-testid="stElementToolbar"] button:focus-visible,
[data-testid="stDataFrame"]:has(:focus-visible) {
  outline: 2px solid #1f77b4;
  outline-offset: 1px;
}
/* For readers whose system asks for less motion: no fades, slides or spinners of the page
   (Streamlit's and ours); what changes still changes, at once. */
@media (prefers-reduced-motion: reduce) {
  *, *::before, *::after {
    animation-duration: 0.01ms !important;
    animation-iteration-count: 1 !important;
    transition-duration: 0.01ms !important;
    scroll-behavior: auto !important;
  }
}
</style>
"""


def app_frame(page: st.Page) -> None:
    """Shared chrome drawn by the router before each page.

    The sidebar gets the presenter-mode switch, the copy-link button and the chart download
    format; the page gets the shared CSS.
    """
    started = st.session_state.setdefault("app.started", time.monotonic())
    if time.monotonic() - started < STALE_NOT_FOUND_S and _asked_for(page):
        st.html(CLOSE_STALE_NOT_FOUND_JS, unsafe_allow_javascript=True)
    room.follow_link()
    presenting = is_presenting()
    _load_plotly_early()
    st.sidebar.toggle(
        "Presenter mode",
        key=PRESENT_KEY,
        help="Larger text and cell numbers for a projector; the link gets ?present=1.",
    )
    room.sidebar()
    with st.sidebar:
        st.html(COPY_LINK_HTML + A11Y_JS + CHART_TEXT_JS, unsafe_allow_javascript=True)
        st.segmented_control(
            "Chart downloads (camera button)",
            ["PNG", "SVG"],
            key=FIGURE_FORMAT_KEY,
            default="PNG",
            help="SVG stays sharp at any size on a slide; PNG pastes anywhere.",
        )
        st.toggle(
            "Show chart data as tables",
            key=TABLES_KEY,
            help="A table of each chart's numbers under it, for screen readers and copying.",
        )
    st.html(BASE_CSS + (PRESENTER_CSS if presenting else ""))
    room.banner()


def _load_plotly_early() -> None:
    """An empty chart, hidden, ahead of everything else on the page.

    The browser fetches and starts Plotly's script only when a chart element first arrives, and
    a page's first chart comes after its idea, formula, controls and prose: this chart starts
    the script while they arrive, so the first real chart does not wait for it on top of them
    (bench/bench_browser_draw.py times navigation to the first chart).
    """
    with st.sidebar.container(key="plotly_preload"):
        st.plotly_chart(go.Figure(), config={"staticPlot": True})


def _asked_for(page: st.Page) -> bool:
    """Whether the page the router runs is the one the browser's address asked for."""
    path = urlparse(st.context.url or "").path.rstrip("/")
    if page.url_path == "":  # the default page lives at the root
        return path == ""
    return path.endswith("/" + page.url_path)


_MARKDOWN_SPECIAL = set("\\`*_{}[]()#+-.!|$<>~:")


def plain(text: str) -> str:
    """`text` with Markdown's special characters escaped, so a token such as `**` or `$x$`
    shows as typed in a caption or heading instead of being formatted."""
    return "".join("\\" + c if c in _MARKDOWN_SPECIAL else c for c in text)


def page_intro(title: str, idea: str, formula: str | None = None) -> None:
    """A page's first lines: its title, the idea in one sentence, the formula."""
    st.title(title)
    st.markdown(idea)
    if formula:
        st.latex(formula)


def stale_notice(what: str) -> None:
    """Say that the pictures below still show the last valid input."""
    st.warning(
        f"{what} has a problem (see the message by the table): the results below are from the "
        "last valid input and are stale until it is fixed.",
        icon="⏸️",
    )


def model_or_stop(
    view: PageState,
    loaded: Any,
    *,
    install: str,
    env_var: str,
    holds: str,
    repo: str,
    retry: Callable[[], None],
) -> Any:
    """The model of `loaded` (a model host's result: `model`, or `error` saying why there is
    none); without one, say why and how to get it, then end the page.

    `install` is the command that installs it; `env_var` the environment variable that can name
    where it is instead, `holds` what that place holds, `repo` the Hugging Face repository it is a
    copy of; `retry` forgets the failed attempt, for the "look again" button.
    """
    if loaded.model is not None:
        return loaded.model
    error = loaded.error
    elsewhere = f"or set `{env_var}` to {holds} (a copy of the Hugging Face repository `{repo}`)."
    st.error(error, icon=":material/cloud_off:")
    st.markdown(
        "The other pages work without it. To run this one, install the model package into the "
        "app's environment (it needs no torch) and restart the app:"
    )
    st.code(install, language="bash")
    st.markdown(elsewhere)
    st.button("Look for the model again", icon=":material/refresh:", on_click=retry)
    view.sync_url()
    st.stop()


def labelled_radio(label: str, labels: Mapping[str, str], key: str) -> str:
    """A horizontal radio over `labels` (value → what it shows) on a widget key bound to the
    link (`view.choice_key`)."""
    return st.radio(label, list(labels), format_func=labels.get, horizontal=True, key=key)


def what_to_try(prompts: Sequence[str]) -> None:
    """Close a page with experiments that lead to the next insight."""
    st.header("What to try")
    st.markdown("\n".join(f"- {prompt}" for prompt in prompts))


def initial_sidebar_state() -> str:
    """Presenter mode starts with the sidebar out of the way."""
    return "collapsed" if is_presenting() else "auto"
