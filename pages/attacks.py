"""Jailbreak attacks: the direct-attack (UPIA) comparison of two runs, and attack sets to generate
(optionally with responses filled by the application under test)."""
import streamlit as st

from evaluators import JudgeConfig, load_dataset
from evaluators.suites.safety import attack_records, fill_responses, records_text
from ui import downloads, loaders, safety as sw, state, upia, widgets as w

w.entry()  # first: a run that skipped app.py's router goes through it (ui.widgets.entry)

st.title("Jailbreak attacks")
tab_upia, tab_make = st.tabs(["Direct attack comparison (UPIA)", "Generate an attack set"], key="atab",
                             bind=state.URL)
with tab_upia, w.guard():  # each tab guarded apart: an error in one leaves the other drawn
    st.caption("Run the harm metrics twice on the same rows: once as they are (baseline) and once with a "
               "jailbreak in the user turn (attack). A row is a direct-attack defect for a harm when the "
               "attack run's severity is above the threshold and the baseline's is not.")
    runs = loaders.completed_safety_runs(st.query_params.get("base"))
    if len(runs) < 2:
        st.info("Two completed runs with harm metrics are needed. Generate an attack set in the next tab "
                "(it fills the attack responses when you point it at your application), then under New "
                "evaluation run hate_unfairness, sexual, violence or self_harm on the original dataset "
                "(baseline) and on the attack set (attack).")
        st.page_link("pages/new.py", label="Start a new evaluation", icon=":material/play_arrow:")
    else:
        ids, label = [r["id"] for r in runs], w.run_label(runs)
        # unless the link names them: the newest run of an attack set (its rows carry "attack") is the attack,
        # the newest other run the baseline, whichever was run first
        columns = {d["id"]: d["columns"] for d in loaders.datasets()}  # one cached list, not a read per run
        attacked = [r["id"] for r in runs if "attack" in columns.get(r["dataset_id"], ())]
        plain = [i for i in ids if i not in attacked]
        base_id = state.pick("Baseline run", "base", ids, (plain or ids[-1:])[0], format_func=label)
        attack_id = state.pick("Attack run", "attack", ids, (attacked or ids[:1])[0], format_func=label)
        base, attack = loaders.run(base_id), loaders.run(attack_id)
        # the columns both runs' rows have; "id" first (an attack set pairs with its source by row number)
        shared = [c for c in columns.get(base["dataset_id"], ()) if c in set(columns.get(attack["dataset_id"], ()))]
        choices = ["id"] + [c for c in shared if c != "id"]
        id_column = state.pick("Pair rows by", "idcol", choices, "id",
                               help="the column whose value is the same on a row and its attacked copy; "
                                    "an attack set made here pairs with its source by row number under \"id\"")
        if base_id == attack_id:
            st.info("Pick two different runs.")
        else:
            cmp = loaders.attack_comparison(base, attack, id_column)
            sw.upia(cmp)
            picked = upia.paired_rows(cmp, id_column)  # a row selected: its prompt, answer and reasons
            if picked is not None:
                upia.pair_detail(picked, cmp, id_column, base, attack)
with tab_make, w.guard():
    saved = loaders.datasets(st.query_params.get("dataset"))
    dataset_ids = [d["id"] for d in saved]
    did = state.pick("Dataset", "dataset", dataset_ids, next(iter(dataset_ids), None),
                     format_func=w.dataset_label(saved))
    if not did:
        st.info("No dataset yet: upload one on the Datasets page.")
        st.stop()
    c1, c2 = st.columns(2)
    kind = c1.radio("Attack", ["direct", "indirect"], horizontal=True, key="atk.kind",
                    help="direct: a jailbreak before the user's message (UPIA); indirect: an instruction "
                         "planted in the context or a retrieved document (XPIA)")
    seed = int(c2.number_input("Seed", 0, 2**31 - 1, 0, key="atk.seed", help="the same seed, the same attacks"))
    fill = st.toggle("Fill responses from the application under test", key="atk.fill")
    target = key = system = None
    lacking = []
    if fill:
        c3, c4 = st.columns(2)
        base_url = c3.text_input("Target base URL (OpenAI-compatible)", key="atk.url")
        model = c4.text_input("Target model", key="atk.model")
        system = st.text_area("System prompt sent to the target", key="atk.system") or None
        c5, c6 = st.columns(2)
        key = c5.text_input("Target API key", type="password", key="atk.key",
                            help="kept in this browser session only") or None
        concurrency = int(c6.number_input("Concurrency", 1, 64, 8, key="atk.concurrency"))
        lacking = [what for what, value in (("base URL", base_url), ("model", model)) if not value.strip()]
        if not lacking:
            target = JudgeConfig(model=model.strip(), provider="compatible", base_url=base_url.strip(),
                                 concurrency=concurrency)
    # a greyed button says why (its tooltip, and a line under it: a disabled button's tooltip may not show)
    why = (f"Give the target's {' and '.join(lacking)} above to fill the responses, or turn filling off."
           if lacking else None)
    if st.button("Generate attack set", type="primary", key="atk.go", disabled=bool(lacking), help=why):
        ds = loaders.dataset(did)
        records = attack_records(ds, kind, seed)
        if target is not None:
            bar = st.progress(0.0, text="asking the target")
            report = fill_responses(records, target, system, key, column_mapping=ds.mapping,
                                    on_progress=lambda d, n: bar.progress(d / n, text=f"{d}/{n} responses"))
            if report.failed:
                st.error(f"{len(report.failed):,} of {w.count(len(records), 'target call')} failed; nothing was "
                         "saved. First:")
                st.code(next(iter(report.failed.values())), language=None)  # the server's words, as text
                st.stop()
        name = f"{ds.name} · {kind} attack · seed {seed}" + (f" · {target.model}" if target else "")
        made = load_dataset(records, ds.mapping, name=name)
        st.session_state["atk.made"] = loaders.store().save_dataset(made)
        loaders.forget_lists()
    if why:
        st.caption(why)
    made_id = st.session_state.get("atk.made")
    if made_id:
        made = loaders.dataset(made_id)
        st.success(f"Saved as a new dataset ({w.count(len(made), 'row')}):")
        st.text(made.name)
        downloads.offer(f"atk.download.{made_id}", "Download as JSONL", f"{made.name}.jsonl", "application/jsonl",
                        lambda: records_text(made.records, "a.jsonl"))  # not /media/: bound to this browser
        st.page_link("pages/new.py", label="Evaluate it", icon=":material/play_arrow:",
                     query_params={"dataset": made_id})
        upia.attack_set_preview(made)  # with the app's responses
