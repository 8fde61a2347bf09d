"""The yardstick for the load benchmark: a bare Streamlit page a typical author would write.

A slider, a formula, a dataframe and three Plotly heatmaps, with no caching and no fragments.
`bench/bench_live_audience.py` serves it under the same load as the app, in the same run, so
the app's figures can be read against what Streamlit itself costs on this machine; `?charts=N`
draws N heatmaps instead of three, for `bench/bench_browser_draw.py`'s page-by-page comparison.
"""

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import streamlit as st

st.title("A bare Streamlit page")
n = st.slider("Tokens", 2, 12, 6)
st.latex(r"\mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d_k}}\right)V")
rng = np.random.default_rng(n)
q, k, v = (rng.normal(size=(n, 4)) for _ in range(3))
scores = q @ k.T / 2.0
weights = np.exp(scores - scores.max(axis=1, keepdims=True))
weights /= weights.sum(axis=1, keepdims=True)
st.dataframe(pd.DataFrame(weights).round(3))
charts = min(max(int(st.query_params.get("charts", 3)), 1), 40)
matrices = (scores, weights, weights @ v)
for index in range(charts):
    matrix = matrices[index % 3]
    st.plotly_chart(go.Figure(go.Heatmap(z=matrix, text=np.round(matrix, 2))), key=f"chart{index}")
