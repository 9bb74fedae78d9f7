"""Other tools' files as they write them (tests/formats/): OpenAI Evals, DeepEval, Ragas; conversations with one
context beside their messages. Expected values are written by hand from each tool's documented format."""
from __future__ import annotations

import json

import pytest

from evaluators.api import evaluate
from evaluators.core.errors import DataValidationError
from evaluators.data.loading import load_dataset, load_dataset_streaming
from evaluators.judge.config import JudgeConfig
from tests.conftest import ROOT
from tests.judge_server import JudgeServer, default_responder
from tests.safety_judge import safety_responder

FORMATS = ROOT / "tests" / "formats"
EVALS = FORMATS / "openai_evals.jsonl"
NO_CONTEXT_YET = {"groundedness", "retrieval", "indirect_attack"}


def canonical_rows(ds):
    return [{k: v for k, v in ds.canonical(i).items() if v is not None} for i in range(len(ds))]


# ------------------------------------------------------------------ OpenAI Evals

def test_openai_evals_rows_load_as_single_turn_rows():
    ds = load_dataset(EVALS)
    assert (ds.shape, ds.detected, len(ds)) == ("single", "openai-evals", 5)
    assert ds.mapping == {"query": "input", "response": "completion", "ground_truth": "ideal"}
    assert canonical_rows(ds) == [
        {"query": "Which river flows through Budapest?", "response": "The Danube river flows through Budapest.",
         "ground_truth": "The Danube",  # the first of the acceptable answers
         "history": "System: Answer the following questions as concisely as possible.\n"
                    "System (example_user): What's the capital of Portugal?\n"
                    "System (example_assistant): Lisbon"},
        {"query": "The first person to walk on the Moon was ", "response": "Neil Armstrong, in July 1969.",
         "ground_truth": "Neil Armstrong", "history": "System: Complete the phrase as concisely as possible."},
        {"query": "And if I'd rather drink white?", "response": "Try a full-bodied oaked Chardonnay.",
         "ground_truth": "An oaked Chardonnay",
         "history": "System: You are a terse sommelier.\nUser: I'm serving grilled lamb chops.\n"
                    "Assistant: A Syrah would suit them."},
        {"query": "Name the chemical symbol for tungsten.", "response": "W", "ground_truth": "W"},  # input as text
        {"query": "A bat and a ball cost $1.10 in total. The bat costs $1.00 more than the ball. How much does the "
                  "ball cost?", "response": "The ball costs 10 cents.", "ground_truth": "The ball costs 5 cents.",
         "history": ""},  # only a system message: it is the prompt
    ]
    # the records stay as the file wrote them
    assert ds.records[0]["ideal"] == ["The Danube", "Duna"] and ds.records[0]["input"][2]["name"] == "example_assistant"
    assert ds.shown_text(2) == ("And if I'd rather drink white?", "Try a full-bodied oaked Chardonnay.")


def test_openai_evals_f1_compares_with_the_first_acceptable_answer(store):
    res = evaluate(EVALS, ["f1_score"], store=store)
    rows = res.results.rows()
    # SQuAD normalisation (lower case, no punctuation, no a/an/the), by hand:
    # 1 [danube river flows through budapest] vs [danube]: p 1/5, r 1 -> 1/3
    # 2 [neil armstrong in july 1969] vs [neil armstrong]: p 2/5, r 1 -> 4/7
    # 3 [try fullbodied oaked chardonnay] vs [oaked chardonnay]: p 1/2, r 1 -> 2/3
    # 4 [w] vs [w] -> 1;  5 [ball costs 10 cents] vs [ball costs 5 cents]: p 3/4, r 3/4 -> 3/4
    want = [1 / 3, 4 / 7, 2 / 3, 1.0, 0.75]
    assert [r["outputs.f1_score.f1_score"] for r in rows] == pytest.approx(want)
    assert res.metrics["f1_score.f1_score"] == pytest.approx(sum(want) / 5)
    assert rows[0]["inputs.ideal"] == ["The Danube", "Duna"]  # results carry the file's own values


def test_openai_evals_judge_sees_the_last_user_turn_its_history_and_the_first_answer(judge_server, judge_config, store):
    evaluate(EVALS, ["similarity", "violence"], judge=judge_config, store=store)
    prompts = [p + "\n" for p in judge_server.prompts()]  # (a prompt ends with its last field, the response)
    assert len(prompts) == 10

    def one(*parts):
        hit = [p for p in prompts if all(x in p for x in parts)]
        assert len(hit) == 1, parts
        return hit[0]

    sim = one("Predicted answer:\nThe Danube river flows through Budapest.")
    assert "Question:\nWhich river flows through Budapest?\n" in sim
    assert "Correct answer:\nThe Danube\n" in sim and "Duna" not in sim
    harm = one("VIOLENCE", "Try a full-bodied oaked Chardonnay.")
    assert ("Earlier turns of the conversation (may be empty):\nSystem: You are a terse sommelier.\n"
            "User: I'm serving grilled lamb chops.\nAssistant: A Syrah would suit them.\n\n"
            "User's message:\nAnd if I'd rather drink white?\n") in harm
    plain = one("VIOLENCE", "Assistant's reply to rate:\nW\n")
    assert "(may be empty):\n(none)\n\nUser's message:\nName the chemical symbol for tungsten.\n" in plain


def test_openai_evals_api_sample_object_is_the_response():
    ds = load_dataset(FORMATS / "openai_evals_api_samples.jsonl")
    assert ds.mapping == {"query": "input", "response": "sample", "ground_truth": "ideal"} and ds.detected == "openai-evals"
    assert canonical_rows(ds) == [
        {"query": "Convert 5 kilometres to miles, to one decimal place.", "response": "About 3.1 miles.",
         "ground_truth": "3.1 miles", "history": "Developer: Reply in one short sentence."},
        {"query": "Which gas do plants absorb during photosynthesis?",
         "response": "They absorb carbon dioxide from the air.", "ground_truth": "Carbon dioxide",
         "history": "Developer: Reply in one short sentence."},
    ]
    assert ds.records[1]["sample"]["usage"]["total_tokens"] == 36  # the object is kept whole
    # the graders' sample namespace names its text output_text
    text = load_dataset([{"input": "Say hi.", "sample": {"output_text": "Hi!", "output_json": None}}])
    assert text.canonical(0)["response"] == "Hi!"


def test_bad_openai_evals_rows_are_named_by_file_row_and_field(tmp_path):
    good = {"input": [{"role": "user", "content": "2+2?"}], "ideal": "4", "completion": "4"}
    rows = [good,
            {**good, "input": [{"role": "human", "content": "2+2?"}]},
            {**good, "input": [{"role": "user", "content": [{"type": "input_text", "text": "2+2?"}]}]},
            {**good, "ideal": ["4", {"value": 4}]},
            {**good, "completion": None, "sample": None},
            {**good, "ideal": ["15", 15]}]  # numbers among the answers are their text: no problem
    p = tmp_path / "evals.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataValidationError) as e:
        load_dataset(p, {"ground_truth": "ideal"})  # guessed, a column with an object among its answers is no ground truth
    assert [str(x) for x in e.value.problems] == [
        "evals.jsonl, row 2, field 'input': query[0]: role must be one of assistant, developer, system, tool, user; "
        "this message has role 'human'",
        "evals.jsonl, row 3, field 'input': query[0]: content must be text, got a list",
        "evals.jsonl, row 4, field 'ideal': ground_truth[1]: each acceptable answer must be text, got an object",
        "evals.jsonl, row 5, field 'completion': missing response",
    ]
    # a list that is no chat prompt is no query guess; named as the query, it is refused by row and field
    with pytest.raises(DataValidationError, match=r"row 1, field 'input': query\[0\]: must be an object with role "
                                                  "and content, got text"):
        load_dataset([{**good, "input": ["2+2?"]}], {"query": "input"})
    bad_sample = [{"input": "Hi", "sample": {"output": [{"role": "assistant", "content": None}], "error": None}}]
    with pytest.raises(DataValidationError, match="row 1, field 'sample': response: the OpenAI Evals sample has no "
                                                  "text 'output_text' nor 'output' messages with text content"):
        load_dataset(bad_sample, {"response": "sample"})
    assert load_dataset(rows[-1:]).records[0]["ideal"] == ["15", "15"]


# ------------------------------------------------------------------ DeepEval and Ragas, as they export

def test_deepeval_json_export_maps_and_reads():
    ds = load_dataset(FORMATS / "deepeval_goldens.json")  # EvaluationDataset.save_as(file_type="json")
    assert (ds.shape, ds.detected, len(ds)) == ("single", "deepeval", 3)
    assert ds.mapping == {"query": "input", "response": "actual_output", "ground_truth": "expected_output",
                          "context": "retrieval_context"}  # 'context' (the ideal context) stays a column
    assert canonical_rows(ds) == [
        {"query": "Can I return a bike helmet I've already worn?",
         "response": "Worn helmets can't be returned for hygiene reasons, but unworn ones come back within 30 days.",
         "ground_truth": "No. Helmets can only be returned unworn, within 30 days of purchase.",
         "context": "[doc1] Returns: unworn items in original packaging within 30 days of purchase.\n\n"
                    "[doc2] Helmets, gloves and saddles that have been used cannot be returned for hygiene reasons."},
        {"query": "How long does a tubeless tyre sealant last?",
         "response": "Most sealants stay liquid for two to six months, depending on heat and humidity.",
         "ground_truth": "Roughly two to six months; top it up sooner in hot weather.",
         "context": "[doc1] Sealant dries out over time: expect two to six months, less in hot climates."},
        {"query": "Do you service e-bike motors in store?",
         "response": "Yes, our Leeds and York branches service Bosch and Shimano motors.",
         "context": "[doc1] E-bike motor servicing (Bosch, Shimano) is offered at the Leeds and York branches."},
    ]
    assert ds.fields() == {"query", "response", "ground_truth", "context"}
    assert ds.availability()["f1_score"] == [] and ds.availability()["groundedness"] == []


def test_ragas_jsonl_export_maps_and_reads():
    ds = load_dataset(FORMATS / "ragas_dataset.jsonl")  # EvaluationDataset.to_jsonl (None fields left out)
    assert (ds.shape, ds.detected, len(ds)) == ("single", "common", 3)
    assert ds.mapping == {"query": "user_input", "response": "response", "ground_truth": "reference",
                          "context": "retrieved_contexts"}  # reference_contexts stays a column
    assert canonical_rows(ds) == [
        {"query": "What does the warranty on the Aurora kettle cover?",
         "response": "Two years against manufacturing defects; limescale damage isn't covered.",
         "ground_truth": "A two-year warranty covering manufacturing defects, excluding limescale damage.",
         "context": "[doc1] The Aurora kettle carries a two-year warranty against manufacturing defects.\n\n"
                    "[doc2] Limescale damage is not covered by the warranty."},
        {"query": "Is the Aurora kettle dishwasher safe?",
         "response": "No. Only the lid may be washed, by hand; never immerse the base.",
         "context": "[doc1] Hand-wash the lid only; the base contains electrical parts and must never be immersed."},
        {"query": "How many cups does it boil at once?", "response": "Up to seven cups (1.7 litres).",
         "ground_truth": "About seven cups, 1.7 litres.", "context": "[doc1] Capacity: 1.7 litres, about seven cups."},
    ]


# ------------------------------------------------------------------ a conversation's own context

SHARED = FORMATS / "conversation_shared_context.jsonl"
TIMETABLE = "Timetable: trains from Oslo to Bergen leave at 06:25, 08:25 and 16:25; the trip takes about 7 hours."
FARES = "Fares: a Minipris ticket Oslo-Bergen starts at 249 NOK and is non-refundable."
PETS = "Pets: dogs ride in the designated pet carriage; they need a ticket at half the child fare."


@pytest.mark.parametrize("load", [load_dataset, load_dataset_streaming])
def test_a_conversations_context_enables_its_metrics(load, tmp_path):
    shared_only = tmp_path / "shared_only.jsonl"
    shared_only.write_text(SHARED.read_text().splitlines()[0] + "\n")  # no turn brings a context of its own
    ds = load(shared_only)
    assert ds.shape == "conversation" and ds.mapping == {"messages": "messages", "context": "context"}
    assert ds.fields() == {"messages", "query", "response", "context"}
    lacking = ds.availability()  # what the New evaluation page enables metrics by
    assert {m: lacking[m] for m in NO_CONTEXT_YET} == {m: [] for m in NO_CONTEXT_YET}
    assert lacking["similarity"] == ["messages[].ground_truth"]  # the others are read as before
    ds = load(SHARED)
    assert [[t.context for t in ds.turns(i)] for i in range(2)] == [[TIMETABLE, TIMETABLE], [FARES, PETS]]


def labels_or_scores(prompt: str, request: dict) -> str:
    return (safety_responder if "INDIRECT ATTACK" in prompt else default_responder)(prompt, request)


def test_a_conversations_context_reaches_each_turns_judge(store):
    with JudgeServer(labels_or_scores) as judge:
        res = evaluate(SHARED, sorted(NO_CONTEXT_YET), store=store,
                       judge=JudgeConfig(model="loopback", provider="compatible", base_url=judge.url))
        prompts = [p + "\n" for p in judge.prompts()]  # (a prompt ends with its last field, the response)
    assert len(prompts) == 3 * 4  # three metrics, four assistant turns, none skipped
    want = {"The first one leaves Oslo at 06:25.": TIMETABLE, "Roughly seven hours.": TIMETABLE,
            "Minipris tickets start at 249 NOK.": FARES,
            "Dogs travel in the pet carriage for half a child fare.": PETS}  # its own context, not the shared one
    for reply, context in want.items():
        (grounded,) = [p for p in prompts if f"RESPONSE:\n{reply}\n" in p]
        (audited,) = [p for p in prompts if f"Assistant's reply to audit:\n{reply}\n" in p]
        assert f"CONTEXT:\n{context}\n" in grounded and f"CONTEXT given to the assistant:\n{context}\n" in audited
        assert FARES not in grounded + audited if context == PETS else True
    for question, context in [("When is the first train to Bergen?", TIMETABLE), ("How long is the ride?", TIMETABLE),
                              ("What's the cheapest fare?", FARES), ("Can I bring my dog?", PETS)]:
        (retrieval,) = [p for p in prompts if f"User's question:\n{question}\n\nRetrieved documents:\n" in p]
        assert f"Retrieved documents:\n{context}\n" in retrieval
    m = res.metrics
    assert {m[f"{name}.scored_rows"] for name in NO_CONTEXT_YET} == {2}
