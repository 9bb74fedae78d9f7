"""The New metric page: a judge metric built from a form (or a saved one edited) as our template's text,
tried on 5 rows of a dataset against the judge configured as New evaluation configures it, saved in the store
(each changed save a new version) and exported as ``.prompty`` or our template. Model and dataset text is shown
as text (code blocks, literal spans), never as Markdown or HTML."""
from __future__ import annotations

import streamlit as st

from evaluators import EvalError
from evaluators.metrics.custom import specs_from_text
from evaluators.metrics.custom.builder import SCALES, build_template, export
from evaluators.run.trial import TRIAL_ROWS, try_metric
from ui import auth, downloads, judge_form, loaders, state, widgets as w

NEW = "A new metric"


PASTE = "A metric file's text (paste it)"
FORMATS = {"Our template (.md)": "template", "Prompty (.prompty)": "prompty", "OpenAI grader (.json)": "openai_grader"}


# A label metric flags something (kinds.label: true = found, a defect): a row passes when the judge says no.
LABEL_ANSWERS = ["no (false): not found", "yes (true): found"]
LABEL_HELP = ("A yes/no metric flags what its description names (e.g. 'the answer reveals personal data'): the judge "
              "answers yes when it finds it, and the row then fails.")


def pass_rule(spec) -> str:
    """What a metric's verdict rests on, in its own terms: a label's answer, or a score's range and threshold."""
    if spec.kind == "label":
        return "yes/no, a row passes when the judge answers no (not found)"
    return (f"{spec.kind}, {spec.score_range[0]:g}-{spec.score_range[1]:g}, passes "
            f"{'≥' if spec.higher_is_better else '≤'} {spec.default_threshold:g}")


def _source(saved: list[dict]) -> tuple[str, str, str | None]:
    """(the definition's text, its format, a new name for it or None): built from the form, pasted from a
    file, or a saved metric's latest version."""
    names = {f"{d['name']} (version {d['version']})": d for d in saved}
    start = st.selectbox("Start from", [NEW, PASTE] + list(names), key="metric.start")
    if start == PASTE:
        st.session_state.pop("metric.loaded", None)
        c1, c2 = st.columns(2)
        fmt = FORMATS[c1.selectbox("Format", list(FORMATS), key="metric.format")]
        rename = c2.text_input("Name (optional)", key="metric.rename", help="renames a Prompty or grader file's "
                               "metric, e.g. the SDK's coherence.prompty as sdk_coherence (coherence is built in)")
        return st.text_area("Definition (editable)", key="metric.text", height=420), fmt, rename.strip() or None
    if start != NEW:
        d = names[start]
        if st.session_state.get("metric.loaded") != start:  # a saved metric chosen: its text into the editor
            st.session_state["metric.text"] = d["text"]
            st.session_state["metric.loaded"] = start
        st.caption(f"Editing {w.literal(d['name'])}: saving a changed text makes version {d['version'] + 1}; runs "
                   f"made with version {d['version']} keep it.")
        return (st.text_area("Definition (editable)", key="metric.text", height=420), d["format"],
                d["name"] if d["format"] != "template" else None)
    st.session_state.pop("metric.loaded", None)
    return _form(), "template", None


def _form() -> str:
    did = st.session_state.get("metric.dataset")
    columns = sorted(loaders.dataset(did).readable()) if did else ["query", "response", "context", "ground_truth"]
    c1, c2 = st.columns(2)
    name = c1.text_input("Name", key="metric.name", placeholder="politeness",
                         help="lower-case letters, digits and _; the results' outputs.<name> columns")
    description = c2.text_input("Description", key="metric.description",
                                placeholder="How polite the answer is, 1 (rude) to 5 (courteous).")
    fields = st.multiselect("Fields the judge reads", columns, default=[c for c in ("response",) if c in columns],
                            key="metric.fields", help="from the dataset's columns")
    c3, c4, c5 = st.columns(3)
    scale = c3.selectbox("Scale", list(SCALES), key="metric.scale")
    kind, (lo, hi), integer, _ = SCALES[scale]
    higher = c4.radio("Direction", ["Higher is better", "Lower is better"], key="metric.direction",
                      disabled=kind != "score") == "Higher is better"
    default = {"1-5": 3.0, "1-10": 6.0, "0-1": 0.5, "pass/fail": 1.0, "labels": 0.0}[scale]
    if kind == "label":  # a yes/no answer passes on its word, not at a number ("Passes at 0.00" said nothing)
        c5.radio("A row passes when the judge answers", LABEL_ANSWERS, key="metric.threshold.labels", disabled=True,
                 help=LABEL_HELP)
        threshold = default
    else:
        threshold = c5.number_input("Passes at", float(lo), float(hi), default, 1.0 if integer else 0.05,
                                    key=f"metric.threshold.{scale}")
    rubric = st.text_area("Rubric: the criteria, and what each level means", key="metric.rubric", height=140,
                          placeholder="1 = rude or dismissive\n3 = neutral\n5 = warm and courteous throughout")
    built = build_template(name.strip() or "my_metric", description, fields or ["response"], scale, higher,
                           threshold, rubric)
    if st.session_state.get("metric.built") != built:  # the form changed: the text follows it
        st.session_state["metric.text"] = built
        st.session_state["metric.built"] = built
    st.caption("The form writes the template below; edit the text freely (changing the form writes it again).")
    return st.text_area("Template (editable)", key="metric.text", height=420)


def _trial(spec, ds_id: str) -> None:
    st.subheader(f"Try on {TRIAL_ROWS} rows")
    judge, api_key = (None, None)
    if spec.is_judge:
        judge, api_key = judge_form.judge_settings()
        if judge is None:
            return
    if st.button(f"Try on {TRIAL_ROWS} rows", key="metric.try"):
        st.session_state["metric.trial"] = (spec.signature(), try_metric(loaders.dataset(ds_id), spec, judge, api_key))
    tried = st.session_state.get("metric.trial")
    if not tried or tried[0] != spec.signature():
        return
    for r in tried[1]:
        value = r["value"]
        shown = ("no value" if value is None else f"{spec.name} = {str(value).lower()}" if isinstance(value, bool)
                 else f"{spec.name} = {value:g}")
        head = f"Row {r['row']}: {shown}"
        with st.expander(head, expanded=r["error"] is not None):
            if r["error"]:
                st.error(w.literal(r["error"]))
            if r["prompt"] is not None:
                st.caption("Prompt sent to the judge")
                st.code(r["prompt"], language=None, wrap_lines=True)
            if r["reply"] is not None:
                st.caption("The judge's reply")
                st.code(r["reply"], language=None, wrap_lines=True)


def render() -> None:
    saved = loaders.saved_metrics()
    listed = loaders.datasets()
    ids = [d["id"] for d in listed]
    did = state.pick("Dataset (its columns, and rows to try)", "dataset", ids, next(iter(ids), None),
                     format_func=w.dataset_label(listed))
    st.session_state["metric.dataset"] = did
    text, fmt, rename = _source(saved)
    try:
        (spec,) = specs_from_text(text, fmt, "the definition", name=rename)[:1]
    except EvalError as e:
        st.error(w.literal(e))
        return
    st.caption(f"{spec.name}: {pass_rule(spec)}; reads " + w.literal(", ".join(spec.fields)))
    if did:
        _trial(spec, did)
    st.subheader("Save for the team")
    c1, c2, c3 = st.columns(3)
    if c1.button("Save", type="primary", key="metric.save"):
        done = loaders.store().save_metric(text, fmt, created_by=auth.current_user(), name=rename)
        loaders.forget_saved_metrics()
        st.session_state["metric.saved"] = (done["name"], done["version"])
        st.rerun()  # the pickers (Start from, New evaluation's) list the new version from now on
    if "metric.saved" in st.session_state:
        name, version = st.session_state.pop("metric.saved")
        st.success(f"Saved {w.literal(name)} version {version}: it is in every teammate's metric picker on "
                   "New evaluation.")
    for col, to, ext in ((c2, "prompty", "prompty"), (c3, "template", "md")):
        try:
            body = export(text, fmt, to)
        except ValueError as e:
            col.caption(f"No .{ext} export: {w.literal(e)}")
            continue
        with col:  # served as Results' exports are (single use, this browser), never from /media/
            downloads.offer(f"metric.export.{ext}", f"Export as .{ext}", f"{spec.name}.{ext}", "text/plain",
                            lambda body=body: body)
