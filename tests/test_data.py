"""Loading, schema detection, mapping and validation: every problem by file, row and field."""
from __future__ import annotations

import hashlib
import json
import re

import pandas as pd
import pytest

from evaluators.data.dataset import conversation_turns
from evaluators.data.loading import load_dataset, load_dataset_streaming
from evaluators.core.errors import DataValidationError, MAX_PROBLEMS, UsageError
from tests.conftest import CONVERSATIONS, SINGLE


def write(tmp_path, name, text, mode="w"):
    p = tmp_path / name
    (p.write_bytes if mode == "wb" else p.write_text)(text)
    return p


def test_samples_load_with_expected_shapes():
    single, conv = load_dataset(SINGLE), load_dataset(CONVERSATIONS)
    assert (single.shape, len(single), single.detected) == ("single", 31, "azure")
    assert single.mapping == {"query": "query", "response": "response", "context": "context", "ground_truth": "ground_truth"}
    assert (conv.shape, len(conv)) == ("conversation", 20)
    assert {"context"} <= conv.fields()
    assert sum(len(conv.turns(i)) for i in range(len(conv))) == 42  # 18 two-turn + 2 three-turn


@pytest.mark.parametrize("fmt", ["jsonl", "json", "csv", "parquet"])
def test_formats_round_trip(tmp_path, fmt):
    rows = [{"query": "q1", "response": "r1", "ground_truth": "g1", "extra": "x"},
            {"query": "q2", "response": "r2", "ground_truth": "g2", "extra": "y"}]
    p = tmp_path / f"d.{fmt}"
    if fmt == "jsonl":
        p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif fmt == "json":
        p.write_text(json.dumps(rows))
    elif fmt == "csv":
        pd.DataFrame(rows).to_csv(p, index=False)
    else:
        pd.DataFrame(rows).to_parquet(p)
    ds = load_dataset(p)
    assert ds.records == rows and ds.columns == ["query", "response", "ground_truth", "extra"]
    assert ds.canonical(1)["ground_truth"] == "g2"


@pytest.mark.parametrize("columns,expected,schema", [
    (["input", "actual_output", "expected_output", "retrieval_context"],
     {"query": "input", "response": "actual_output", "ground_truth": "expected_output", "context": "retrieval_context"}, "deepeval"),
    (["input", "target", "output"], {"query": "input", "ground_truth": "target", "response": "output"}, "inspect"),
    (["question", "answer", "reference"], {"query": "question", "response": "answer", "ground_truth": "reference"}, "common"),
])
def test_schema_detection(columns, expected, schema):
    row = {c: (["doc one", "doc two"] if c == "retrieval_context" else f"v-{c}") for c in columns}
    ds = load_dataset([row])
    assert ds.mapping == expected and ds.detected == schema
    if "context" in expected:
        assert ds.canonical(0)["context"] == "[doc1] doc one\n\n[doc2] doc two"


def test_openai_messages_detected_as_conversation():
    ds = load_dataset([{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}])
    assert ds.shape == "conversation" and ds.detected == "azure"


def test_explicit_mapping_overrides_detection():
    ds = load_dataset([{"prompt": "p", "answer": "a", "model_answer": "m"}], column_mapping={"response": "model_answer"})
    assert ds.mapping["response"] == "model_answer" and ds.mapping["query"] == "prompt"
    with pytest.raises(UsageError, match="no column 'nope'"):
        load_dataset([{"query": "q", "response": "r"}], column_mapping={"query": "nope"})
    with pytest.raises(UsageError, match="cannot map 'answer'"):
        load_dataset([{"query": "q", "response": "r"}], column_mapping={"answer": "query"})


def test_every_problem_reported_with_file_row_and_field(tmp_path):
    p = write(tmp_path, "bad.jsonl", "\n".join([
        '{"query": "ok", "response": "fine"}',
        '{"query": "broken" "response": "x"}',
        '{"query": "q", "response": ["not", "text"]}',
        '{"query": "q"}',
        '[1, 2]',
    ]))
    with pytest.raises(DataValidationError) as e:
        load_dataset(p)
    got = [(pr.source, pr.row, pr.field) for pr in e.value.problems]
    assert got == [("bad.jsonl", 2, ""), ("bad.jsonl", 3, "response"), ("bad.jsonl", 4, "response"), ("bad.jsonl", 5, "")]
    assert "broken JSON line" in e.value.problems[0].message
    assert "bad.jsonl, row 3, field 'response': response must be text, got a list" in str(e.value)


def test_non_utf8_names_the_row(tmp_path):
    p = write(tmp_path, "latin1.csv", "query,response\nok,fine\ncaf\xe9,bad\n".encode("latin-1"), "wb")
    with pytest.raises(DataValidationError, match=r"latin1.csv, row 3: not UTF-8: byte 0xe9"):
        load_dataset(p)


@pytest.mark.parametrize("name,text,why", [("empty.jsonl", "", r"empty \(0 bytes\)"), ("blank.jsonl", "\n \n", "holds no rows"),
                                           ("empty.csv", "query,response\n", "holds no rows"), ("empty.json", "[]", "holds no rows")])
def test_empty_files(tmp_path, name, text, why):
    with pytest.raises(DataValidationError, match=why):
        load_dataset(write(tmp_path, name, text))


def test_missing_field_for_chosen_metric_names_rows(tmp_path):
    p = write(tmp_path, "d.csv", "query,response,ground_truth\nq1,r1,g1\nq2,r2,\nq3,r3,g3\n")
    ds = load_dataset(p)
    with pytest.raises(DataValidationError) as e:
        ds.check_metrics(["bleu"])
    assert [(pr.row, pr.field) for pr in e.value.problems] == [(2, "ground_truth")]
    with pytest.raises(UsageError, match="'groundedness' needs context"):
        ds.check_metrics(["groundedness"])


def test_problem_list_is_capped(tmp_path):
    p = write(tmp_path, "many.jsonl", "{broken\n" * 80)
    with pytest.raises(DataValidationError) as e:
        load_dataset(p)
    assert len(e.value.problems) == MAX_PROBLEMS and e.value.truncated


def test_conversation_validation(tmp_path):
    rows = [
        {"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo", "context": {"citations": "x"}}]},
        {"messages": [{"role": "wizard", "content": "hi"}]},
        {"messages": "not a list"},
    ]
    p = write(tmp_path, "c.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataValidationError) as e:
        load_dataset(p)
    msgs = [(pr.row, pr.message) for pr in e.value.problems]
    assert msgs[0][0] == 1 and "context must be" in msgs[0][1]
    assert any(r == 2 and "role must be one of" in m for r, m in msgs)
    assert any(r == 2 and "no assistant message" in m for r, m in msgs)
    assert any(r == 3 and "messages must be a list" in m for r, m in msgs)


def test_conversation_turns_carry_history_and_citations():
    msgs = [{"role": "system", "content": "be nice"}, {"role": "user", "content": "Q1"},
            {"role": "assistant", "content": "A1", "context": {"citations": [{"id": "d1", "title": "T", "content": "C"}]}},
            {"role": "user", "content": "Q2"}, {"role": "assistant", "content": "A2", "ground_truth": "G2"}]
    t = conversation_turns(msgs)
    assert [(x.query, x.response) for x in t] == [("Q1", "A1"), ("Q2", "A2")]
    assert t[0].context == "[doc1] d1 T\nC" and t[1].context is None and t[1].ground_truth == "G2"
    assert t[1].history == "System: be nice\nUser: Q1\nAssistant: A1\nUser: Q2"


def test_csv_json_cells_are_decoded_for_messages(tmp_path):
    conv = json.dumps([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}])
    p = tmp_path / "c.csv"
    pd.DataFrame([{"messages": conv}]).to_csv(p, index=False)
    ds = load_dataset(p)
    assert ds.shape == "conversation" and ds.turns(0)[0].response == "a"


@pytest.mark.parametrize("header,expected", [
    ("question,answer,context", {"query": "question", "response": "answer", "context": "context"}),
    ("input,actual_output,context,expected_output",
     {"query": "input", "response": "actual_output", "context": "context", "ground_truth": "expected_output"}),
    ("input,target,output,context", {"query": "input", "response": "output", "ground_truth": "target", "context": "context"}),
])
def test_csv_context_column_is_mapped_to_context(tmp_path, header, expected):
    # issue 10: the schema that wins on query/response had no name for 'context', so it was dropped
    cells = {"context": "Paris is the capital of France."}
    row = ",".join(cells.get(c, f"v-{c}") for c in header.split(","))
    ds = load_dataset(write(tmp_path, "rag.csv", f"{header}\n{row}\n"))
    assert ds.mapping == expected
    assert ds.canonical(0)["context"] == "Paris is the capital of France."
    assert "groundedness" in [n for n, lacking in ds.availability().items() if not lacking]


def test_numbers_where_text_belongs_become_text_everywhere_and_inputs_are_not_changed():
    rows = [{"query": 6, "response": 42, "ground_truth": 0.5},
            {"messages": None, "query": "q", "response": "r"}]
    ds = load_dataset([rows[0]])
    assert ds.records == [{"query": "6", "response": "42", "ground_truth": "0.5"}]
    assert rows[0] == {"query": 6, "response": 42, "ground_truth": 0.5}  # the caller's rows are untouched
    conv = [{"messages": [{"role": "user", "content": 6}, {"role": "assistant", "content": 42}]}]
    ds = load_dataset(conv)
    assert ds.turns(0)[0].query == "6" and ds.turns(0)[0].response == "42"
    assert conv[0]["messages"][1]["content"] == 42
    for bad, kind in [(True, "true/false"), (float("inf"), "a number (inf)"), ({"a": 1}, "an object")]:
        with pytest.raises(DataValidationError, match=f"response must be text, got {re.escape(kind)}"):
            load_dataset([{"query": "q", "response": bad}])


def test_content_hash_is_the_documented_digest_computed_record_by_record():
    ds = load_dataset(SINGLE)
    blob = json.dumps([ds.mapping, ds.records], sort_keys=True, separators=(",", ":"), default=str)
    assert ds.content_hash == hashlib.sha256(blob.encode()).hexdigest()


def test_csv_duplicate_header_is_refused_not_silently_merged(tmp_path):
    # csv.DictReader keeps only the last of two equal column names: a whole column would vanish
    with pytest.raises(DataValidationError, match="dup.csv, field 'response': this column name appears twice"):
        load_dataset(write(tmp_path, "dup.csv", "query,response,response\nq,first,second\n"))


def test_non_utf8_found_past_the_first_megabyte_and_across_a_split_character(tmp_path):
    # the check reads a megabyte at a time: the bad byte's offset and line must still be exact
    head = "query,response\n" + "a,b\n" * 300_000  # 1,200,015 bytes
    p = write(tmp_path, "late.csv", head.encode() + b"caf\xe9,x\n", "wb")
    with pytest.raises(DataValidationError, match=r"late.csv, row 300002: not UTF-8: byte 0xe9 at offset 1200018"):
        load_dataset(p)
    split = ("query,response\n" + "a" * (2**20 - 17) + ",é\n").encode()  # é's two bytes straddle 1 MiB
    assert split[2**20 - 1:2**20 + 1] == "é".encode()
    assert load_dataset(write(tmp_path, "split.csv", split, "wb")).records[0]["response"] == "é"
    broken = split[:2**20] + b"\xff\n"  # the first byte of é, then a byte that cannot follow it
    with pytest.raises(DataValidationError, match=f"row 2: not UTF-8: byte 0xc3 at offset {2**20 - 1:d};"):
        load_dataset(write(tmp_path, "broken.csv", broken, "wb"))


@pytest.mark.parametrize("empty", [[], {}])
def test_an_empty_list_or_object_where_text_belongs_is_refused(empty):
    # found by tests/test_properties.py: it passed as "missing" and reached the judge's template as a list
    with pytest.raises(DataValidationError, match="row 1, field 'query': query must be text, got (a list|an object)"):
        load_dataset([{"query": empty, "response": "r"}])


def test_conversation_turns_take_a_number_as_its_text():
    # whatever path a conversation was checked by (our messages list or the SDK's object), turns are text
    t = conversation_turns([{"role": "user", "content": 6}, {"role": "assistant", "content": 42}])
    assert (t[0].query, t[0].response, t[0].history) == ("6", "42", "User: 6")


def test_a_column_whose_values_do_not_fit_is_not_guessed_for_a_field(tmp_path):
    """Safety sets carry the expected verdict as a true/false `label`: the name suggests a ground truth, the
    values cannot be one, so it is left unmapped and the rows load (they were all refused before)."""
    rows = [{"query": f"q{i}", "response": f"r{i}", "label": i % 2 == 0} for i in range(3)]
    f = tmp_path / "safety.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    for ds in (load_dataset(str(f)), load_dataset_streaming(str(f))):
        assert ds.mapping == {"query": "query", "response": "response"} and len(ds) == 3
    # the same name holding text is a ground truth, as before; and a user's own mapping is still checked
    texts = [{"question": "q", "answer": "a", "label": "yes"}]
    assert load_dataset(texts).mapping["ground_truth"] == "label"
    with pytest.raises(DataValidationError, match="ground_truth must be text, got true/false"):
        load_dataset(rows, {"ground_truth": "label"})


def test_a_protected_material_run_on_a_set_with_expected_labels(tmp_path):
    """The run a safety set is made for: rows with a true/false `label` (the expected verdict) are judged."""
    from evaluators.cli.main import main
    from tests.judge_server import JudgeServer
    from tests.safety_judge import safety_responder

    rows = [{"query": f"q{i}", "response": f"r{i} [pm:{'true' if i == 0 else 'false'}]", "label": i == 0}
            for i in range(3)]
    f = tmp_path / "pm.jsonl"
    f.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with JudgeServer(responder=safety_responder) as s:
        assert main(["run", str(f), "--metrics", "protected_material", "--out", str(tmp_path / "o"),
                     "--judge-base-url", s.url, "--quiet"]) == 0
    m = json.loads((tmp_path / "o" / "metrics.json").read_text())
    assert m["protected_material.protected_material_defect_rate"] == pytest.approx(1 / 3)


@pytest.mark.parametrize("columns, mapping, expected", [
    (["query", "reponse"], {"query": "query"}, {"reponse": "response"}),
    (["question", "answer", "contxt"], {"query": "question", "response": "answer"}, {"contxt": "context"}),
    (["Ground_Truth2", "response"], {"response": "response"}, {"Ground_Truth2": "ground_truth"}),
    (["input", "ideal", "notes", "id"], {"query": "input", "ground_truth": "ideal"}, {}),  # nothing near: none
])
def test_near_miss_columns_are_suggested_for_the_field_they_nearly_name(columns, mapping, expected):
    from evaluators.data.mapping import near_misses

    assert near_misses(columns, mapping) == expected


def test_rows_left_out_are_named_and_the_others_keep_their_file_numbers():
    from evaluators.data.loading import bad_rows, inspect_parsed, read_upload, rows_text, without_rows

    assert [rows_text(r) for r in ([3], [3, 7], [1, 2, 3, 7, 9, 10])] == ["row 3", "rows 3 and 7", "rows 1-3, 7 and 9-10"]
    assert rows_text(list(range(1, 400, 2)), 30) == "rows 1, 3, 5, 7, 9, 11, 13, 15, 17... (200 rows)"
    lines = [json.dumps({"query": f"q{k}", "response": f"r{k}"}) for k in range(1, 11)]
    lines[4] = json.dumps({"query": "q5", "response": [1]})
    parsed = read_upload("\n".join(lines).encode(), "f.jsonl")
    checked = inspect_parsed(parsed)
    assert bad_rows(checked.problems, checked.truncated) == [5] and bad_rows(checked.problems, True) == []
    ds = inspect_parsed(without_rows(parsed, [5])).dataset
    assert ds.source == "f.jsonl without row 5" and list(ds.row_numbers) == [1, 2, 3, 4, 6, 7, 8, 9, 10]
    assert parsed.numbers == list(range(1, 11))  # the upload as read stays whole (another choice may be made)
