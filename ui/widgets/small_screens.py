"""What keeps charts and tables readable on a phone (390 px) as on a laptop (issue #51).

The server does not know the screen's width, so what depends on it is done in the browser:

- A dense axis shows every k-th label. Plotly spaces a category axis's labels 1.2 fonts
  apart, but a label's box is 1.33 fonts high, so upright neighbours still touched; and an
  axis of numbers or words sized by the server cannot know its length. After Plotly draws an
  axis, its labels are measured once and every k-th is kept, the smallest k at which no two
  kept labels' boxes meet. Redrawn at another width (a turned phone), the axis is thinned again.
- Text drawn in a plot never overlaps either: a point's label or an annotation (a head's name
  over its columns) that would meet one kept before it is left out (the hover carries a
  point's), and numbers written in cells too narrow for them are all left out (the colours,
  the hover and "Show chart data as tables" still carry them).
- Tables keep their first column in view when they scroll sideways (`table`).
"""

from __future__ import annotations

from typing import Any

import streamlit as st

# Marks the axes and text layers Plotly redraws, then, once per frame, shows every label of
# each and hides those that would meet: reads of every chart's boxes first, then the writes,
# so a frame costs one layout of the page at most. Mutations are filtered on their target
# alone: a chart adds thousands of nodes while it draws, and only a few layers are looked at.
CHART_TEXT_JS = """
<script>
(() => {
  if (window.__chartText) return;
  window.__chartText = true;
  const AXES = ".xaxislayer-above, .yaxislayer-above, .cbaxis";
  const PLOTTED = ".scatterlayer .trace, .heatmaplayer .hm, .barlayer";
  const NOTES = ".infolayer";
  const WATCHED = `${AXES}, ${PLOTTED}, ${NOTES}`;
  const dirty = new Set();
  let queued = false;
  const meet = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 0.5
    && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0.5;
  const apart = (boxes) => boxes.every((box, i) => boxes.slice(i + 1).every((b) => !meet(box, b)));
  // Of `drawn` (indices into `boxes`), each whose box meets none of `taken` or of those kept.
  const firstFit = (drawn, boxes, taken = []) => drawn.filter((i) => {
    const fits = taken.every((box) => !meet(box, boxes[i]));
    if (fits) taken.push(boxes[i]);
    return fits;
  });
  // Which of `texts` (with their `boxes`) stay: an axis keeps every k-th label; annotations
  // (a head's name over its columns) and labels of points and bars keep each that meets none
  // kept before it; numbers in cells stay all, or none.
  const keep = (group, texts, boxes) => {
    const drawn = texts.map((_, i) => i)
      .filter((i) => boxes[i].width > 0 && texts[i].textContent.trim());
    if (group.matches(NOTES)) return firstFit(drawn, boxes);
    if (group.matches(AXES)) {
      let step = 1;
      while (step < drawn.length && !apart(drawn.filter((_, n) => n % step === 0)
        .map((i) => boxes[i]))) step += 1;
      return drawn.filter((_, n) => n % step === 0);
    }
    if (labelled(group)) {
      // The chart's axis labels are in the way too (a bar's number must not cover them).
      const chart = group.closest(".js-plotly-plot");
      const ticks = [...chart.querySelectorAll(".xtick text, .ytick text")]
        .map((text) => text.getBoundingClientRect()).filter((box) => box.width > 0);
      return firstFit(drawn, boxes, ticks);
    }
    return apart(drawn.map((i) => boxes[i])) ? drawn : [];
  };
  // Labels of points are kept or left out across every trace of the plot that has points
  // (a query's label meets a key's); numbers in cells, trace by trace.
  const labelled = (group) => group.querySelector(".points path") !== null;
  const gather = (group) => labelled(group) && group.matches(".scatterlayer .trace")
    ? group.closest(".scatterlayer") : group;
  const textsOf = (group) => {
    if (group.matches(NOTES)) return [...group.querySelectorAll(".annotation text")];
    return group.matches(".scatterlayer")
      ? [...group.querySelectorAll(".trace")].filter(labelled)
        .flatMap((trace) => [...trace.querySelectorAll("text")])
      : [...group.querySelectorAll("text")];
  };
  const thin = () => {
    queued = false;
    const groups = [...new Set([...dirty].filter((group) => group.isConnected).map(gather))];
    dirty.clear();
    const texts = groups.map(textsOf);
    for (const text of texts.flat()) {
      if (text.dataset.thinned) { text.style.display = ""; delete text.dataset.thinned; }
    }
    const boxes = texts.map((list) => list.map((text) => text.getBoundingClientRect()));
    // Every read before any write: one layout of the page for all of them.
    const kept = groups.map((group, n) => new Set(keep(group, texts[n], boxes[n])));
    groups.forEach((group, n) => {
      texts[n].forEach((text, i) => {
        if (!kept[n].has(i) && boxes[n][i].width > 0) {
          text.style.display = "none";
          text.dataset.thinned = "1";
        }
      });
    });
  };
  const schedule = () => {
    if (dirty.size && !queued) { queued = true; requestAnimationFrame(thin); }
  };
  new MutationObserver((changes) => {
    for (const change of changes) {
      const group = change.target.closest && change.target.closest(WATCHED);
      if (group) dirty.add(group);
    }
    schedule();
  }).observe(document.body, { childList: true, subtree: true });
  // This script arrives with the sidebar: on a page whose figures are cached and whose Plotly
  // is loaded, charts may be drawn before it watches (a dense axis left unthinned for good).
  document.querySelectorAll(WATCHED).forEach((group) => dirty.add(group));
  schedule();
})();
</script>
"""


def table(data: Any, **options: Any) -> None:
    """`st.dataframe(data, **options)` whose first column stays in view while a narrow screen
    scrolls the others sideways (`pinned_first`)."""
    st.dataframe(data, **pinned_first(data, options))


def pinned_first(data: Any, options: dict[str, Any]) -> dict[str, Any]:
    """`options` for `st.dataframe` or `st.data_editor` of `data` (a DataFrame, a Styler of
    one, or a list of rows as dicts) that pin its first column, keeping what `column_config`
    says of it: Streamlit pins an index of its own accord, not the first column of a table
    drawn with `hide_index=True`."""
    first = _first_column(data) if options.get("hide_index") else None
    if first is None:
        return options
    config = dict(options.get("column_config") or {})
    said = config.get(first)
    said = {"label": said} if isinstance(said, str) else dict(said or {})
    config[first] = {**said, "pinned": True}
    return {**options, "column_config": config}


def _first_column(data: Any) -> str | None:
    if isinstance(data, list):  # rows as dicts, in column order
        return next(iter(data[0]), None) if data else None
    columns = getattr(data, "data", data).columns  # a DataFrame's, or a Styler's
    return columns[0] if len(columns) else None
