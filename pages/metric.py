"""New metric: build a judge metric from a form (or edit a saved one), try it on 5 rows, save it for the team."""
import streamlit as st

from ui import metric_builder, widgets as w

w.entry()
st.title("New metric")
with w.guard():
    metric_builder.render()
