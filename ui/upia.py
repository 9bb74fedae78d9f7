"""The direct-attack (UPIA) comparison's paired rows, read one at a time: the attack prompt, the app's answer and
the judge's reason side by side; and an attack set's preview with the app's responses. What a dataset, the app
or the judge wrote is shown as text (``st.text``, table cells), never Markdown or HTML."""
from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from evaluators.core.kinds.severity import level_name
from evaluators.core.registry import get_metric
from ui import loaders, state
from ui.rows import scroll_to
from ui.widgets import count, plain, table

CELL_CHARS = 200  # a table cell's text; the detail has all of it


def _cut(text) -> str | None:
    if text is None:
        return None
    text = text if isinstance(text, str) else json.dumps(text, ensure_ascii=False)
    return text if len(text) <= CELL_CHARS else text[:CELL_CHARS] + "…"


def _severity(v) -> str:
    return "–" if v is None else f"{v:g}"


def paired_rows(cmp, id_column: str) -> dict | None:
    """The paired rows, one line each (per harm the severity without and with the attack, direct-attack defects
    marked; the attack prompt and the app's answer cut short); a click on one selects it (``urow`` in the URL:
    its pairing key). Returns the selected pair's record (None: none selected)."""
    if not cmp.rows:
        return None
    lines = []
    for r in cmp.rows:
        line = {id_column: str(r[id_column])}
        for h in cmp.harms:
            hit = r.get(f"{h}.direct_attack_defect")
            line[f"{h} baseline → attack"] = (f"{_severity(r.get(f'{h}.baseline_score'))} → "
                                              f"{_severity(r.get(f'{h}.attack_score'))}")
            line[f"{h} direct attack"] = "⚠ defect" if hit else ("no defect" if hit is False else "error")
        line["attack prompt"], line["app's answer"] = _cut(r.get("attack.query")), _cut(r.get("attack.response"))
        lines.append(line)
    keys = [line[id_column] for line in lines]
    st.markdown("#### Paired rows")
    st.caption(f"{count(len(lines), 'row')} in both runs. Select one (the box at its left) to read its attack "
               "prompt, the app's answer and the judge's reason side by side.")
    chosen = state.read("urow")
    event = table(pd.DataFrame(lines), key="upia.rows", widths={"attack prompt": "large", "app's answer": "large"},
                  on_select="rerun", selection_mode="single-row",
                  selection_default={"selection": {"rows": [keys.index(chosen)]}} if chosen in keys else None)
    k = state.selected(event, len(lines))
    if k is not None and keys[k] != chosen:
        chosen = keys[k]
        state.write("urow", chosen)
    if chosen is not None and chosen not in keys:
        st.error(f"Row not found: the link names a pair ({plain(id_column)} {plain(chosen)}) these two runs do not "
                 "have.")  # both from the link and the data: shown as written
        return None
    return cmp.rows[keys.index(chosen)] if chosen in keys else None


def _reasons(run: dict, row: int | None, harms: list[str]) -> dict[str, str | None]:
    """Each harm's judge reason on ``row`` (1-based, as the comparison numbers a run's rows) of ``run``."""
    if row is None:
        return {}
    res = loaders.results(run, {})
    cells = {h: res.cell(h, row - 1) for h in harms}
    return {h: (c.reason if c is not None and c.status == "ok" else (c.error if c is not None else None))
            for h, c in cells.items()}


def pair_detail(rec: dict, cmp, id_column: str, base: dict, attack: dict) -> None:
    """One pair, framed and scrolled to: the attack run's prompt, the app's answer and, per harm, the judge's
    severity, verdict and reason, side by side; the baseline's under them, folded."""
    key = str(rec[id_column])
    attack_reasons = _reasons(attack, rec.get("attack_row"), cmp.harms)
    with st.container(border=True, key="upia_detail"):
        st.subheader(f"Row {plain(key)}", anchor=False)  # the pairing key is the data's
        st.caption(plain(f"{id_column} {key} · row {rec.get('attack_row')} of the attack run, "
                         f"row {rec.get('baseline_row')} of the baseline run"))
        prompt, answer, judge = st.columns([3, 3, 4], gap="medium")
        with prompt:
            st.markdown("**Attack prompt**")
            _text(rec.get("attack.query"))
        with answer:
            st.markdown("**The app's answer**")
            _text(rec.get("attack.response"))
        with judge:
            st.markdown("**The judge**")
            for h in cmp.harms:
                _verdict(rec, h, cmp.metrics[f"{h}.threshold"], attack_reasons.get(h))
        with st.expander("The same row without the attack (baseline run)"):
            base_reasons = _reasons(base, rec.get("baseline_row"), cmp.harms)
            c1, c2, c3 = st.columns([3, 3, 4], gap="medium")
            c1.markdown("**Prompt**")
            with c1:
                _text(rec.get("baseline.query"))
            c2.markdown("**The app's answer**")
            with c2:
                _text(rec.get("baseline.response"))
            c3.markdown("**The judge**")
            with c3:
                for h in cmp.harms:
                    score = rec.get(f"{h}.baseline_score")
                    st.caption(f"{h}: severity {_severity(score)}" + _level(h, score))
                    _text(base_reasons.get(h))
        st.page_link("pages/results.py", label="Open this row of the attack run on Results",
                     icon=":material/open_in_new:",
                     query_params={"run": attack["id"], "view": "Rows", "row": state.row_param(rec.get("attack_row", 1) - 1)})
    scroll_to("upia_detail", f"{base['id']}:{attack['id']}:{key}")


def _level(harm: str, score) -> str:
    try:
        name = level_name(get_metric(harm), score)
    except Exception:  # noqa: BLE001 — a harm no longer registered: its number alone
        name = None
    return f" ({name})" if name else ""


def _verdict(rec: dict, harm: str, threshold: float, reason: str | None) -> None:
    after, before = rec.get(f"{harm}.attack_score"), rec.get(f"{harm}.baseline_score")
    hit = rec.get(f"{harm}.direct_attack_defect")
    line = (f"{harm}: severity {_severity(after)}{_level(harm, after)} under attack, {_severity(before)} without "
            f"(a defect above {threshold:g})")
    if hit:
        st.error(f"{line} · direct-attack defect", icon=":material/warning:")  # ours: names, numbers, words
    elif hit is False:
        st.caption(f"{line} · no direct-attack defect")
    else:
        st.warning(f"{line} · not scored in both runs")
    _text(reason)


def _text(value) -> None:
    if value is None or value == "":
        st.caption("(none)")
    else:
        st.text(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1))


def attack_set_preview(made, rows: int = 20) -> None:
    """An attack set's first rows: the attack planted and, beside it, the user's question and the app's response
    (the response the target gave when the set was filled from it; else the source's)."""
    columns = ["id", "attack", "attack_category"]
    for field in ("query", "response", "messages"):
        name = made.mapping.get(field) or (field if field != "messages" else None)
        if name and name not in columns and any(name in r for r in made.records[:rows]):
            columns.append(name)
    preview = [{c: _cut(r.get(c)) for c in columns if any(c in x for x in made.records[:rows])}
               for r in made.records[:rows]]
    st.caption(f"The first {count(min(rows, len(made.records)), 'row')}:")
    table(pd.DataFrame(preview), key=f"atk.preview.{made.name}", widths={"attack": "medium", "response": "large"})
