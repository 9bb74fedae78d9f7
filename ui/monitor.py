"""The Monitoring page's project picker, "Instrument your app" (an ingest token made in the page, and the snippet
the docs' Monitoring page shows: one text, kept here, that tests/test_monitor_page.py finds in docs/monitoring.md)
and traffic counts. The trace list and a trace opened are in ``ui.monitor_traces``."""
from __future__ import annotations

import os

import streamlit as st

from evaluators.store.monitor_rules import DECISIONS
from ui import auth, loaders, state, widgets as w

PIP = ("pip install openai opentelemetry-sdk opentelemetry-exporter-otlp-proto-http "
       "opentelemetry-instrumentation-openai-v2==2.4b0 opentelemetry-util-genai==1.1b0")
# The five lines an app runs before its first call (docs/monitoring.md quotes them).
SNIPPET = """from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider, export
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
trace.set_tracer_provider(p := TracerProvider()); p.add_span_processor(export.BatchSpanProcessor(OTLPSpanExporter())); OpenAIInstrumentor().instrument()"""
# Its environment: where the receiver is and the token (never in the code or on a command line).
ENV = """export OTEL_EXPORTER_OTLP_ENDPOINT={endpoint} OTEL_EXPORTER_OTLP_HEADERS="Authorization=Bearer%20{token}"
export OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=SPAN_ONLY"""
TOKEN = "monitor.token"  # session state: (project, token) just made; in this session's memory only
STATES = {"traces": ("received", "traces received: spans or log records of them came"),
          "open": ("open", "waiting for their root span to end and the project's quiet period to pass"),
          "mapped": ("mapped", "complete: made into a row (query, response...)"),
          "no_content": ("no content", "mapped, but the app captured no content: open one for what to set"),
          "no_root": ("no root", "taken as they were after 10 minutes: their root span never ended"),
          "late": ("late", "with spans that came after the trace was mapped (kept, not judged again)")}
WHY = {"sampled_out": "over the rule's sample rate: the trace id's hash decides, the same for every rule",
       "no_content": "sampled, but the app captured no content to judge",
       "pending": "to be judged at the next rule run", "judged": "judged: its scores are a row of a run",
       "failed": "judging failed: open the trace for the error"}


def endpoint() -> str:
    """This machine's receiver, as scripts/start.sh starts it (``EVAL_MONITOR_PORT`` moves it)."""
    return f"http://127.0.0.1:{os.environ.get('EVAL_MONITOR_PORT') or 4318}"


def project_picker() -> str | None:
    """The project the URL names (a name it does not know: "not found"), else the first; None when there is none."""
    projects = loaders.monitor_projects(st.query_params.get("project"))
    return state.pick("Project", "project", projects, projects[0] if projects else None)


def instrument(project: str | None) -> None:
    """Make a token (for ``project``, or for a new project named here) and show it once with the snippet."""
    st.markdown("Send an app's OpenTelemetry traces here. Install, in the app's environment:")
    st.code(PIP, language="bash")
    if project is None:
        name = st.text_input("New project's name", max_chars=200, placeholder="shop", key="monitor.new_project")
    else:
        name = project
    label = "Make a token" if project else "Make the project and its token"
    if st.button(label, icon=":material/key:", key="monitor.make_token"):
        name = (name or "").strip()
        if not name:
            st.warning("Name the project first.")
            st.stop()
        st.session_state[TOKEN] = (name, loaders.make_ingest_token(name, auth.current_user()))
        if project is None:
            state.write("project", name)
            st.rerun()
    made = st.session_state.get(TOKEN)
    token = made[1] if made and made[0] == name else None
    if token:
        st.success("A new token for this project. It is shown this once and stored only as a hash: copy it now "
                   "(lost, make another; `monitor token revoke` retires one).", icon=":material/key:")
    st.markdown("Then, in the app's environment (the token there, never in the code or on a command line):")
    st.code(ENV.format(endpoint=endpoint(), token=token or "<token>"), language="bash")
    st.markdown("and before the app's first call:")
    st.code(SNIPPET, language="python")
    if token and st.button("Hide the token", key="monitor.hide_token"):
        st.session_state.pop(TOKEN, None)
        st.rerun()


def traffic(project: str) -> dict:
    """The project's traces by state and each rule's decisions; returns what it read."""
    got = loaders.monitor_traffic(project)
    counts = got["traces"]
    w.metric_cards([(label, f"{counts.get(k, 0):,}", help_) for k, (label, help_) in STATES.items()])
    if not got["rules"]:
        st.caption("No rule judges this project's traces yet: `python -m evaluators monitor rule add --project "
                   f"{w.plain(project)} --name NAME --metrics ...` (docs: Monitoring).")
    for rule in got["rules"]:
        st.markdown(f"**Rule {w.literal(rule['name'])}** (version {rule['version']}, "
                    f"{rule['sample_rate']:.0%} sampled; {w.plain(', '.join(rule['metrics']))})")
        names = [k for k in DECISIONS if k in rule["decisions"]] + [k for k in rule["decisions"] if k not in DECISIONS]
        w.metric_cards([(k.replace("_", " "), f"{rule['decisions'][k]:,}", WHY.get(k, k)) for k in names])
    return got
