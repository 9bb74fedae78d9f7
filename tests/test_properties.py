"""Property-based tests (Hypothesis) for the loader, the column mapper and the judge-reply parser.

Example counts are kept modest so the suite stays fast; set HYPOTHESIS_PROFILE=thorough for more.
"""
from __future__ import annotations

import io
import json
import math
import os

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, assume, given, settings, strategies as st  # noqa: E402

from evaluators.data.dataset import FORMATS, KNOWN_SCHEMAS
from evaluators.data.mapping import build_dataset, detect_mapping
from evaluators.data.loading import inspect_file, load_dataset
from evaluators.core.errors import DataValidationError, UsageError  # noqa: E402
from evaluators.core.registry import FIELDS  # noqa: E402
from evaluators.core.replies import ReplyError, parse_score_reply

pytestmark = pytest.mark.no_store  # opens no store: deselected in the PostgreSQL pass

# no example database: nothing is written into the checkout
settings.register_profile("ci", max_examples=150, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("thorough", max_examples=3000, deadline=None, database=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

EXTS = sorted(FORMATS)
# JSON-looking bytes reach further into the parsers than uniform random bytes do
JSONISH = st.text(alphabet='{}[]",:\\ \n\r\t0123456789.eE+-truefalsnquerysponsemgctxd\x00\ufeffé😀', max_size=300)


def json_values(max_leaves: int = 12):
    scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=20)
    return st.recursive(scalars, lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=8), kids, max_size=4),
                        max_leaves=max_leaves)


def only_our_errors(fn, *args, **kw):
    try:
        return fn(*args, **kw)
    except (DataValidationError, UsageError) as e:
        assert str(e)  # a message a user can read
        return None


# ------------------------------------------------------------------ the loader

@given(data=st.binary(max_size=2000), ext=st.sampled_from(EXTS))
def test_any_bytes_load_or_raise_only_our_errors(data, ext):
    only_our_errors(load_dataset, data, name=f"f{ext}")
    insp = inspect_file(data, f"f{ext}")  # the dashboard's path never raises
    assert (insp.dataset is None) == bool(insp.problems)
    assert all(p.row >= 0 and p.source == f"f{ext}" for p in insp.problems)


@given(text=JSONISH, ext=st.sampled_from([".jsonl", ".json", ".csv"]), bom=st.booleans())
def test_json_like_text_loads_or_raises_only_our_errors(text, ext, bom):
    raw = (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8", "surrogatepass")
    only_our_errors(load_dataset, raw, name=f"f{ext}")


@given(rows=st.lists(st.dictionaries(st.sampled_from(["query", "response", "context", "ground_truth", "messages", "x"]),
                                     json_values(), min_size=1, max_size=5), min_size=1, max_size=5))
def test_any_json_rows_load_or_raise_only_our_errors(rows):
    raw = "".join(json.dumps(r) + "\n" for r in rows).encode()
    ds = only_our_errors(load_dataset, raw, name="rows.jsonl")
    if ds is not None:
        for i in range(len(ds)):
            c = ds.canonical(i)
            assert all(c[f] is None or isinstance(c[f], str) for f in ("query", "response", "ground_truth", "context"))
            for t in ds.turns(i) if ds.shape == "conversation" else []:
                assert isinstance(t.query, str) and isinstance(t.response, str)


# Text a CSV or Parquet cell can carry unchanged: no NUL (binary), no lone surrogates (not UTF-8).
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"), min_size=1, max_size=40)
ROW = st.fixed_dictionaries({"query": TEXT, "response": TEXT, "ground_truth": TEXT, "note": TEXT})


def write(rows: list[dict], fmt: str) -> bytes:
    if fmt == "jsonl":
        return "".join(json.dumps(r) + "\n" for r in rows).encode()
    if fmt == "json":
        return json.dumps(rows, ensure_ascii=False).encode()
    if fmt == "csv":
        import csv

        buf = io.StringIO(newline="")
        w = csv.DictWriter(buf, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
        return buf.getvalue().encode()
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


@given(rows=st.lists(ROW, min_size=1, max_size=8), fmt=st.sampled_from(["jsonl", "json", "csv", "parquet"]))
def test_valid_rows_round_trip_in_every_format(rows, fmt):
    if fmt == "csv":  # a CSV cell cannot say "empty" and "absent" apart, nor hold a bare "\r" outside quotes reliably
        assume(all(v.strip() == v or v.strip() for r in rows for v in r.values()))
    ds = load_dataset(write(rows, fmt), name=f"data.{fmt}")
    assert ds.records == rows
    assert ds.row_numbers == list(range(1, len(rows) + 1))
    assert [ds.canonical(i)["response"] for i in range(len(ds))] == [r["response"] for r in rows]


@given(rows=st.lists(st.fixed_dictionaries({"query": st.integers() | TEXT, "response": st.integers() | st.floats(allow_nan=False, allow_infinity=False) | TEXT}),
                     min_size=1, max_size=6))
def test_numbers_where_text_belongs_are_their_text(rows):
    ds = load_dataset("".join(json.dumps(r) + "\n" for r in rows).encode(), name="n.jsonl")
    assert [ds.records[i]["response"] for i in range(len(rows))] == [r["response"] if isinstance(r["response"], str)
                                                                       else str(r["response"]) for r in rows]


# ------------------------------------------------------------------ the column mapper

KNOWN = sorted({c for names in KNOWN_SCHEMAS.values() for opts in names.values() for c in opts})
COLUMNS = st.lists(st.sampled_from(KNOWN) | st.text(min_size=1, max_size=12), min_size=1, max_size=8, unique=True)


@given(columns=COLUMNS)
def test_detected_mapping_names_distinct_present_columns_for_known_fields(columns):
    mapping, schema = detect_mapping(columns)
    assert set(mapping) <= set(FIELDS)
    assert set(mapping.values()) <= set(columns)
    assert len(set(mapping.values())) == len(mapping)  # one column feeds one field
    assert schema in {*KNOWN_SCHEMAS, "custom", "openai-messages"}
    # a column named exactly like a canonical field is never left out when anything is detected
    for fld in ("context", "ground_truth"):
        if mapping and fld in columns and fld not in mapping:
            pytest.fail(f"column '{fld}' not mapped in {mapping} for {columns}")


@given(columns=st.lists(st.text(st.characters(categories=("L", "N")), min_size=1, max_size=10), min_size=2, max_size=6,
                        unique=True), data=st.data())
def test_an_explicit_mapping_is_obeyed_and_values_follow_it(columns, data):
    response = data.draw(st.sampled_from(columns), label="response column")
    query = data.draw(st.sampled_from([c for c in columns if c != response]), label="query column")
    rows = [{c: f"{c}-{k}" for c in columns} for k in range(3)]
    try:
        ds = build_dataset(rows, [1, 2, 3], "d.jsonl", "d", {"response": response, "query": query})
    except UsageError as e:  # a detected typed column ('messages', 'conversation', 'checklist') cannot hold text
        assert {"messages", "conversation", "checklist"} & set(columns), e
        return
    except DataValidationError as e:
        assert "messages" in str(e) or "conversation" in str(e) or "checklist" in str(e)
        return
    assert ds.mapping["response"] == response and ds.mapping["query"] == query
    assert [f for f, c in ds.mapping.items() if c in (response, query)] in (["response", "query"], ["query", "response"])
    assert [ds.canonical(k)["response"] for k in range(3)] == [f"{response}-{k}" for k in range(3)]
    assert [ds.canonical(k)["query"] for k in range(3)] == [f"{query}-{k}" for k in range(3)]


@given(columns=st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=4, unique=True),
       field=st.text(max_size=12), column=st.text(max_size=8))
def test_a_bad_mapping_is_a_usage_error(columns, field, column):
    rows = [{c: "v" for c in columns}]
    try:
        build_dataset(rows, [1], "d.jsonl", "d", {field: column})
    except UsageError as e:
        assert field not in FIELDS or column not in columns or "response" in str(e), e
    except DataValidationError:
        pass


# ------------------------------------------------------------------ the judge-reply parser

SCALES = st.sampled_from([(1, 5, True), (1, 10, True), (0, 7, True), (0.0, 1.0, False)])


@given(text=st.text(max_size=400) | JSONISH, scale=SCALES)
def test_any_reply_gives_an_in_range_score_or_a_reply_error(text, scale):
    low, high, integer = scale
    try:
        got = parse_score_reply(text, low, high, integer)
    except ReplyError as e:
        assert str(e)
        return
    assert low <= got.score <= high and math.isfinite(got.score)
    assert not integer or got.score == int(got.score)
    assert isinstance(got.reason, str)


@given(score=st.one_of(st.integers(-10**30, 10**30), st.integers(10**300, 10**400), st.floats(), st.text(max_size=8), st.booleans(), st.none(),
                       st.lists(st.integers(), max_size=2)),
       scale=SCALES)
def test_any_score_value_in_an_object_is_checked(score, scale):
    low, high, integer = scale
    try:
        reply = json.dumps({"reason": "r", "score": score})
    except ValueError:
        return
    try:
        got = parse_score_reply(reply, low, high, integer)
    except ReplyError:
        return
    assert low <= got.score <= high and math.isfinite(got.score)


PROSE = st.text(st.characters(blacklist_characters="{}`<>"), max_size=80)
REASON = st.text(max_size=60)


@given(scale=SCALES, data=st.data(), before=PROSE, after=PROSE, reason=REASON,
       wrap=st.sampled_from(["bare", "fence", "json-fence", "think", "prose"]))
def test_a_valid_object_is_found_wherever_it_is(scale, data, before, after, reason, wrap):
    low, high, integer = scale
    score = data.draw(st.integers(low, high) if integer else
                      st.floats(low, high, allow_nan=False).map(lambda x: round(x, 3)), label="score")
    obj = json.dumps({"reason": reason, "score": score}, ensure_ascii=data.draw(st.booleans(), label="ascii"))
    text = {"bare": obj,
            "fence": f"{before}\n```\n{obj}\n```\n{after}",
            "json-fence": f"{before}\n```json\n{obj}\n```\n{after}",
            "think": f"<think>{before} maybe {{\"score\": {high + 1}}}</think>\n{obj}",
            "prose": f"{before} {obj} {after}"}[wrap]
    got = parse_score_reply(text, low, high, integer)
    assert got.score == float(score) and got.reason == reason
