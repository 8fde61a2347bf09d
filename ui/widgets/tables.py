"""How a table's columns print: the column configs `st.dataframe` takes, from a table of formats."""

from __future__ import annotations

from collections.abc import Mapping

import streamlit as st


def number_columns(formats: Mapping[str, str]) -> dict[str, dict]:
    """`{column: format}` → `{column: NumberColumn(format=format)}`: each named column printed
    with its printf-style format ("%.2f") or one of Streamlit's ("localized", "percent")."""
    return {column: st.column_config.NumberColumn(format=fmt) for column, fmt in formats.items()}
