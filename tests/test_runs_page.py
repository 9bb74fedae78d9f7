"""The Runs page's table and its changes (issue 35, "Runs"): AppTest on both stores, runs planted with known scores.

Expected rates are counted by hand from the planted values; who may change a run is ui.auth.may_change's rule.
"""
from __future__ import annotations

import pytest

from evaluators import Store, load_dataset
from evaluators.core.errors import UsageError
from evaluators.run.spec import RunSpec
from evaluators.store.manage import DatasetInUse
from evaluators.store.schema import Result, utcnow
from tests.apptest import app, shown_text
from tests.conftest import ROOT

st_testing = pytest.importorskip("streamlit.testing.v1")
pytestmark = pytest.mark.usefixtures("fresh_caches")  # the PostgreSQL pass (--store postgresql) runs them there

ROWS = [{"query": f"q {i}", "response": f"answer {i}", "ground_truth": f"truth {i}"} for i in range(12)]
# alpha: 12 rows, f1 at threshold 0.5: rows 0-9 scored, 5 of them >= 0.5 (50.0%); rows 10 and 11 errored
ALPHA = [0.9, 0.8, 0.7, 0.6, 0.55, 0.4, 0.3, 0.2, 0.1, 0.0]
# beta: 4 rows, 3 of them >= 0.5 (75.0%), fewer than 10 scored: too few to say
BETA = [1.0, 0.9, 0.2, 0.6]


def plant(store: Store, name: str, values: list[float], errored: int = 0, by: str | None = None,
          rows: list[dict] | None = None) -> str:
    rows = rows if rows is not None else ROWS[:len(values) + errored]
    did = store.save_dataset(load_dataset(rows), created_by=by)
    rid = store.create_run(did, RunSpec(["f1_score"], {"f1_score": 0.5}).to_dict(), "h", name, created_by=by)
    results = [Result(i, "f1_score", 0, "ok", value=v, outputs={"f1_score": v}) for i, v in enumerate(values)]
    results += [Result(len(values) + k, "f1_score", 0, "error", error="boom") for k in range(errored)]
    store.write_results(rid, results)
    now = utcnow()
    store.update_run(rid, status="completed", started_at=now, finished_at=now, tasks_total=len(results),
                     tasks_done=len(values), tasks_errored=errored)
    return rid


@pytest.fixture
def planted(home_store):
    app()  # seeds the samples
    a = plant(home_store, "alpha", ALPHA, errored=2, by="ana")
    b = plant(home_store, "beta", BETA, by="ben")
    from ui import loaders

    loaders.forget_lists()  # the list app() read is cached for 2 s
    return home_store, a, b


def table(at):
    return at.dataframe[0].value


def test_the_table_gives_each_runs_rates_with_their_n_status_author(planted):
    store, a, b = planted
    at = app("pages/runs.py")
    frame = table(at)
    assert list(frame["name"]) == ["beta", "alpha"]  # newest first
    assert list(frame["status"]) == ["completed", "completed with errors"]
    assert list(frame["f1_score pass rate"]) == [75.0, 50.0]
    assert list(frame["f1_score n"]) == ["4 of 4 scored · too few to say", "10 of 12 scored, 2 errored"]
    assert list(frame["author"]) == ["ben", "ana"]
    assert list(frame["id"]) == [b, a]
    # a freshly started dashboard reads them from views/ (kept per state of the run), the same numbers
    import streamlit as st

    from evaluators.read.columns import views_dir

    assert len(list(views_dir(store).glob("rates-*.json"))) == 2
    st.cache_data.clear()
    st.cache_resource.clear()
    assert table(app("pages/runs.py")).equals(frame)
    store.write_results(a, [Result(10, "f1_score", 0, "ok", value=0.7, outputs={"f1_score": 0.7})])  # row 11 retried
    store.update_run(a, tasks_done=11, tasks_errored=1)
    from ui import loaders

    loaders.forget_lists()
    frame = table(app("pages/runs.py"))  # a new state of the run: read again, 6 of 11 now
    assert list(frame["f1_score pass rate"]) == [75.0, 54.5] and frame["f1_score n"][1] == "11 of 12 scored, 1 errored"


def select(at, *positions):
    """Tick rows of the table (as clicks on their boxes would), then rerun."""
    [key] = [k for k in at.session_state._state._state.filtered_state if str(k).startswith("runs.table.")]
    at.session_state[key] = {"selection": {"rows": list(positions), "columns": []}}
    return at.run()


def button(at, label: str):
    return next(b for b in at.button if b.label == label)


def test_rename_archive_and_delete_each_wait_for_their_confirmation(planted):
    store, a, b = planted
    at = select(app("pages/runs.py"), 1)  # alpha
    at.text_input(key=f"runs.rename.{a}").input("  alpha   (th 0.5) ")
    button(at, "Rename").click().run()
    assert store.get_run(a)["name"] == "alpha (th 0.5)"  # blanks folded, as stored
    assert "Renamed: 1 run." in shown_text(at) and list(table(at)["name"]) == ["beta", "alpha (th 0.5)"]

    at = select(at, 0)  # beta: archived only once confirmed
    button(at, "Archive").click().run()
    assert store.get_run(b)["archived_at"] is None and "Archive 1 run" in shown_text(at)
    button(at, "Yes, archive").click().run()
    assert store.get_run(b)["archived_at"] is not None
    assert list(table(at)["name"]) == ["alpha (th 0.5)"]  # hidden by default
    at.toggle(key="archived").set_value(True).run()
    assert list(table(at)["status"]) == ["completed · archived", "completed with errors"]

    at = select(at, 1)  # alpha: Cancel keeps it, Yes deletes it with its results
    button(at, "Delete").click().run()
    assert "Delete 1 run and everything of them" in shown_text(at)
    button(at, "Cancel").click().run()
    assert store.get_run(a)["name"] == "alpha (th 0.5)" and store.result_count(a) == 12
    at = select(at, 1)
    button(at, "Delete").click().run()
    at = select(at, 0)  # another selection: the question asked of alpha is not left waiting
    assert not [x for x in at.button if x.label == "Yes, delete"]
    at = select(at, 1)
    assert not [x for x in at.button if x.label == "Yes, delete"]
    at = select(at, 1)
    from evaluators.read.columns import views_dir

    assert list(views_dir(store).glob(f"{a}-*.npz"))  # the table's rates kept its columns beside the store
    button(at, "Delete").click().run()
    button(at, "Yes, delete").click().run()
    with pytest.raises(KeyError):
        store.get_run(a)
    assert not list(views_dir(store).glob(f"*{a}*"))  # and they went with it
    assert store.result_count(a) == 0 and list(table(at)["name"]) == ["beta"]
    assert "Deleted: 1 run." in shown_text(at)


def test_two_selected_open_compare_with_the_oldest_as_baseline_archived_ones_too(planted):
    store, a, b = planted
    again = plant(store, "alpha again", ALPHA, errored=2)  # on alpha's dataset: rows to compare
    store.archive_run(a)
    store.archive_run(again)
    at = app("pages/runs.py", archived="true")
    assert list(table(at)["name"]) == ["alpha again", "beta", "alpha"]
    at = select(at, 0, 2)
    button(at, "Compare").click().run()
    assert (at.query_params["base"], at.query_params["runs"]) == (a, again)
    assert at.title[0].value == "Compare runs" and at.multiselect[0].value == [again]  # found, though archived


def signed_in(who: str, page: str = "pages/runs.py"):
    """A page signed in as ``who``, a named user (password mode); Boss is an administrator."""
    from tests.test_sign_in_users import _scrypt_line
    from ui.auth import USER

    users = {name: _scrypt_line(f"{name}'s own") for name in ("ana", "ben", "boss")}
    at = st_testing.AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.secrets.update({"evaldash": {"users": users, "admins": ["Boss"]}})
    at.session_state[USER] = who
    return app(page, at, allow_errors=True)


def test_under_sign_in_only_the_author_or_an_administrator_may_change_a_run(home_store):
    app()
    mine = plant(home_store, "mine", BETA, by="ana")
    theirs = plant(home_store, "theirs", BETA, by="ben")
    from ui import loaders

    loaders.forget_lists()
    at = select(signed_in("ana"), 0)  # theirs (newest first)
    assert button(at, "Delete").disabled and button(at, "Archive").disabled
    assert "Only a run's author or an administrator" in shown_text(at) and [t.key for t in at.text_input] == ["q"]
    at = select(at, 1)  # her own
    assert not button(at, "Delete").disabled
    button(at, "Delete").click().run()
    button(at, "Yes, delete").click().run()
    assert [r["id"] for r in home_store.list_runs()] == [theirs]
    at = select(signed_in("boss"), 0)  # an administrator (any case of the name)
    button(at, "Archive").click().run()
    button(at, "Yes, archive").click().run()
    assert home_store.get_run(theirs)["archived_at"] is not None
    assert mine not in {r["id"] for r in home_store.list_runs()}


@pytest.mark.both_stores
def test_the_store_refuses_what_would_break_it(store):
    a = plant(store, "alpha", ALPHA, errored=2)
    did = store.get_run(a)["dataset_id"]
    with pytest.raises(DatasetInUse) as refused:  # its runs are named
        store.delete_dataset(did)
    assert refused.value.runs == [(a, "alpha")] and "alpha (" + a + ")" in str(refused.value)
    with pytest.raises(UsageError, match="cannot be empty"):
        store.rename_run(a, "   ")
    with pytest.raises(UsageError, match="at most 300"):
        store.rename_dataset(did, "x" * 301)
    now = utcnow()
    store.update_run(a, status="running", heartbeat_at=now, finished_at=None)  # a worker holds it
    with pytest.raises(UsageError, match="going on"):
        store.delete_run(a)
    store.update_run(a, status="completed", finished_at=now)
    store.delete_run(a)
    assert store.result_count(a) == 0
    store.delete_dataset(did)  # no run uses it now
    assert did not in {d["id"] for d in store.list_datasets()}
    with pytest.raises(UsageError, match="no dataset"):
        store.delete_dataset(did)


@pytest.mark.parametrize("evaldash,problem", [
    ({"admins": ["boss"]}, "[evaldash] admins names administrators, but no sign-in is configured"),
    ({"password_sha256": "0" * 64, "admins": "boss"}, "[evaldash] admins must be a list of names"),
    ({"password_sha256": "0" * 64, "admins": ["boss (unverified)"]}, "cannot be an administrator"),
])
def test_administrators_that_cannot_be_used_refuse_the_dashboard(evaldash, problem, home_store):
    at = st_testing.AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.secrets.update({"evaldash": evaldash})
    at = app(None, at, allow_errors=True)
    assert problem in shown_text(at) and not at.dataframe


def test_a_dataset_is_renamed_archived_and_deleted_once_confirmed_and_not_while_runs_use_it(planted):
    store, a, b = planted
    used = store.get_run(a)["dataset_id"]
    at = app("pages/datasets.py", dataset=used)
    button(at, "Delete").click().run()
    said = shown_text(at)
    assert "1 run uses this dataset, so it cannot be deleted" in said and f"alpha ({a})" in said
    assert not [x for x in at.button if x.label == "Yes, delete"] and used in {d["id"] for d in store.list_datasets()}

    free = store.save_dataset(load_dataset(ROWS[:3]), created_by="ana")
    at = app("pages/datasets.py", dataset=free)
    at.text_input(key=f"datasets.new_name.{free}").input("three rows")
    button(at, "Rename").click().run()
    assert {d["id"]: d["name"] for d in store.list_datasets()}[free] == "three rows"
    assert "three rows" in list(at.dataframe[0].value["name"])
    button(at, "Archive").click().run()
    assert not {d["id"]: d["archived_at"] for d in store.list_datasets()}[free]  # not before "Yes"
    button(at, "Yes, archive").click().run()
    assert {d["id"]: d["archived_at"] for d in store.list_datasets()}[free] is not None
    at = app("pages/datasets.py")
    assert "three rows" not in list(at.dataframe[0].value["name"])  # hidden by default
    at.toggle(key="ds_archived").set_value(True).run()
    assert "three rows (archived)" in list(at.dataframe[0].value["name"])
    at = app("pages/datasets.py", dataset=free)
    button(at, "Delete").click().run()
    assert "Delete this dataset and its rows?" in shown_text(at)
    button(at, "Yes, delete").click().run()
    assert free not in {d["id"] for d in store.list_datasets()} and "Deleted." in shown_text(at)
    assert "dataset" not in at.query_params


def test_under_sign_in_a_dataset_is_changed_only_by_its_author_or_an_administrator(home_store):
    app()
    theirs = home_store.save_dataset(load_dataset(ROWS[:2]), created_by="ben")
    from ui import loaders

    loaders.forget_lists()
    at = signed_in("ana", "pages/datasets.py")
    at.query_params["dataset"] = theirs
    at.run()
    assert "Only a dataset's author or an administrator" in shown_text(at)
    assert not [x for x in at.button if x.label in ("Delete", "Archive")]
    at = signed_in("boss", "pages/datasets.py")
    at.query_params["dataset"] = theirs
    at.run()
    button(at, "Delete").click().run()
    button(at, "Yes, delete").click().run()
    assert theirs not in {d["id"] for d in home_store.list_datasets()}


@pytest.mark.both_stores
def test_the_command_line_renames_archives_and_deletes_a_delete_needing_yes(store, store_url):
    import subprocess
    import sys

    from tests.conftest import env_for_subprocess

    def cli(*args):
        return subprocess.run([sys.executable, "-m", "evaluators", *args, "--db", store_url], cwd=ROOT, text=True,
                              capture_output=True, env=env_for_subprocess(), timeout=120, stdin=subprocess.DEVNULL)

    a = plant(store, "alpha", ALPHA, errored=2)
    did = store.get_run(a)["dataset_id"]
    p = cli("runs", "rename", a, "alpha\x1b[31m again")
    assert p.returncode == 0 and p.stdout == f"renamed run alpha ({a}) to alpha again\n"  # the escape not printed
    assert store.get_run(a)["name"] == "alpha\x1b[31m again"
    assert cli("runs", "archive", a).returncode == 0 and store.get_run(a)["archived_at"] is not None
    p = cli("datasets", "delete", did, "--yes")
    assert p.returncode == 2 and f"is used by 1 run: alpha again ({a})" in p.stderr
    p = cli("runs", "delete", a)  # no terminal to ask on
    assert p.returncode == 2 and "add --yes" in p.stderr and store.get_run(a)
    assert cli("runs", "delete", a, "--yes").returncode == 0 and store.result_count(a) == 0
    assert cli("datasets", "delete", did, "--yes").returncode == 0
    assert did not in {d["id"] for d in store.list_datasets()}
    p = cli("runs", "delete", a, "--yes")
    assert p.returncode == 2 and p.stderr == f"error: no run {a}\n"
