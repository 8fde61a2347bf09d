"""Streamlit helpers shared by the pages: charts, editors, URL state, page layout."""
