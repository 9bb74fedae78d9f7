"""Issue 36 in Debian's headless Chromium, as a new user: a file of questions only is uploaded, the Datasets page
says a model can answer it, New evaluation's Answers section sets the target (its own Test connection), and the
run judges the answers the loopback target gave. Screenshots under artifacts/screenshots/."""
from __future__ import annotations

import json

import pytest

from tests.browser import needs_chromium, screenshot, served, settle
from tests.conftest import ROOT, wait_for_run
from tests.judge_server import JudgeServer
from tests.procs import wait_until

SHOTS = ROOT / "artifacts" / "screenshots"
pytestmark = [needs_chromium, pytest.mark.usefixtures("queue_worker")]  # PostgreSQL: the run goes to the queue
QUESTIONS = [{"input": "What is the capital of France?", "ideal": "Paris is the capital of France."},
             {"input": "Who wrote Hamlet?", "ideal": "Shakespeare wrote Hamlet."}]


@pytest.fixture(scope="module")
def dash(tmp_path_factory):
    home = tmp_path_factory.mktemp("target-browser") / "evalhome"
    yield from served(home)


def test_a_new_user_has_a_model_answer_uploaded_questions_then_reads_the_judged_run(dash, browser, tmp_path):
    url, store = dash
    upload = tmp_path / "capitals.jsonl"
    upload.write_text("".join(json.dumps(q) + "\n" for q in QUESTIONS))
    with JudgeServer(responder=lambda prompt, req: "Paris is the capital of France.") as target:
        page = browser.new_page(viewport={"width": 1280, "height": 1400})
        page.goto(f"{url}/datasets")
        settle(page, "Upload JSONL")
        page.locator('[data-testid="stFileUploaderDropzoneInput"]').set_input_files(str(upload))
        settle(page, "Questions only: this file has no answers to judge yet")
        page.get_by_role("button", name="Save dataset").click()
        # the page settles before the save lands: the store itself is waited for
        wait_until(lambda: any(d["name"] == "capitals.jsonl" for d in store.list_datasets()), timeout=60,
                   what="the questions saved as a dataset")
        [saved] = [d for d in store.list_datasets() if d["name"] == "capitals.jsonl"]
        page.goto(f"{url}/new?dataset={saved['id']}")
        settle(page, "This dataset has questions only")
        page.get_by_role("textbox", name="Base URL").fill(target.url)
        page.get_by_role("textbox", name="Base URL").press("Enter")
        page.get_by_role("textbox", name="Model (Azure: deployment)").fill("my-app")
        page.get_by_role("textbox", name="Model (Azure: deployment)").press("Enter")
        settle(page)
        page.get_by_role("button", name="Test connection").click()
        settle(page, "The target answered")
        page.get_by_text("F1 word overlap").first.click()  # needs a response: available, the answers are to come
        settle(page)
        page.get_by_role("heading", name="Answers").scroll_into_view_if_needed()
        screenshot(page, SHOTS, "new-evaluation-generate-answers")
        page.get_by_role("button", name="Start evaluation").click()
        page.wait_for_url("**/results?run=*", timeout=60_000)
        rid = page.url.split("run=")[1].split("&")[0]
        assert wait_for_run(store, rid)["status"] == "completed"
        settle(page)
    run = store.get_run(rid)
    answered = store.get_dataset(run["dataset_id"])
    assert answered.name == "capitals.jsonl · my-app"
    assert [r["response"] for r in answered.records] == ["Paris is the capital of France."] * 2
    assert run["spec"]["target"]["model"] == "my-app" and run["spec"]["target"]["calls"] == 2
    # F1 by hand: the first answer is its ideal (1.0); "paris is capital of france" against "shakespeare wrote
    # hamlet" shares no word (0.0): pass rate 1 of 2
    page.goto(f"{url}/results?run={rid}")
    settle(page, "F1 word overlap pass rate")
    page.get_by_text("50%").first.wait_for()
    screenshot(page, SHOTS, "results-of-generated-answers")
