"""The yardstick for the load benchmark: a bare Streamlit page a typical author would write.

A slider, a formula, a dataframe and three Plotly heatmaps, with no caching and no fragments.
`bench/load_viewers.py` serves it under the same load as the app, in the same run, so the app's
figures can be read against what Streamlit itself costs on this machine.
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
for name, matrix in (("scores", scores), ("weights", weights), ("output", weights @ v)):
    st.plotly_chart(go.Figure(go.Heatmap(z=matrix, text=np.round(matrix, 2))), key=name)
