"""What keeps charts and tables readable on a phone (390 px) as on a laptop (issue #51).

The server does not know the screen's width, so what depends on it is done in the browser:

- A dense axis shows every k-th label. Plotly spaces a category axis's labels 1.2 fonts
  apart, but a label's box is 1.33 fonts high, so upright neighbours still touched; and an
  axis of numbers or words sized by the server cannot know its length. After Plotly draws an
  axis, its labels are measured once and every k-th is kept, the smallest k at which no two
  kept labels' boxes meet. Redrawn at another width (a turned phone), the axis is thinned again.
- Tables keep their first column in view when they scroll sideways (`pinned_first_column`).
"""

from __future__ import annotations

from collections.abc import Sequence

import streamlit as st

# Marks the axes Plotly redraws, then, once per frame, shows every label of each and hides all
# but every k-th: reads of every chart's boxes first, then the writes, so a frame costs one
# layout of the page at most. Mutations are filtered on their target alone: a chart adds
# thousands of nodes while it draws, and only its axis layers are looked at.
THIN_AXES_JS = """
<script>
(() => {
  if (window.__thinAxes) return;
  window.__thinAxes = true;
  const AXES = ".xaxislayer-above, .yaxislayer-above, .cbaxis";
  const dirty = new Set();
  let queued = false;
  const meet = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 0.5
    && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0.5;
  const thin = () => {
    queued = false;
    const layers = [...dirty].filter((layer) => layer.isConnected);
    dirty.clear();
    const labels = layers.map((layer) => [...layer.querySelectorAll("text")]);
    for (const text of labels.flat()) {
      if (text.dataset.thinned) { text.style.display = ""; delete text.dataset.thinned; }
    }
    const boxes = labels.map((texts) => texts.map((text) => text.getBoundingClientRect()));
    labels.forEach((texts, n) => {
      const drawn = texts.map((_, i) => i)
        .filter((i) => boxes[n][i].width > 0 && texts[i].textContent.trim());
      const fits = (step) => {
        const kept = drawn.filter((_, i) => i % step === 0).map((i) => boxes[n][i]);
        return kept.every((box, i) => kept.slice(i + 1).every((other) => !meet(box, other)));
      };
      let step = 1;
      while (step < drawn.length && !fits(step)) step += 1;
      drawn.forEach((i, order) => {
        if (order % step) { texts[i].style.display = "none"; texts[i].dataset.thinned = "1"; }
      });
    });
  };
  new MutationObserver((changes) => {
    for (const change of changes) {
      const layer = change.target.closest && change.target.closest(AXES);
      if (layer) dirty.add(layer);
    }
    if (dirty.size && !queued) { queued = true; requestAnimationFrame(thin); }
  }).observe(document.body, { childList: true, subtree: true });
})();
</script>
"""


def pinned_first_column(columns: Sequence[str]) -> dict:
    """A `column_config` for `st.dataframe` that keeps the table's first column in view while
    the rest scrolls sideways (a phone's narrow table)."""
    return {columns[0]: st.column_config.Column(pinned=True)} if columns else {}
