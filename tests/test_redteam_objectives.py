"""A scan's objectives: the bundled set and the SDK's custom_attack_seed_prompts files (issue 33)."""
from __future__ import annotations

import json

import pytest

from evaluators.core.errors import UsageError
from evaluators.suites.redteam.objectives import BUNDLED, RISK_CATEGORIES, choose, load_objectives, read_seed_prompts


def entry(text: str, *risks: str, **extra) -> dict:
    return {"messages": [{"role": "user", "content": text}],
            "metadata": {"target_harms": [{"risk-type": r} for r in risks]}, **extra}


def test_bundled_set_has_ten_or_more_distinct_objectives_per_category():
    raw = json.loads(BUNDLED.read_text(encoding="utf-8"))
    got = read_seed_prompts(BUNDLED)
    assert len(got) == len(raw)
    for cat in RISK_CATEGORIES:
        texts = [o.text for o in got if o.risk_category == cat]
        assert len(texts) >= 10 and len(set(texts)) == len(texts)
    assert len({o.id for o in got}) == len(got)


def test_sdk_file_read_as_array_and_as_lines(tmp_path):
    items = [entry("first", "violence", id="a"), entry("second", "sexual", "self_harm")]
    arr, lines = tmp_path / "seeds.json", tmp_path / "seeds.jsonl"
    arr.write_text("[\n  " + json.dumps(items[0]) + ",\n\n  " + json.dumps(items[1]) + "\n]\n")
    lines.write_text("\n".join(json.dumps(i) for i in items) + "\n")
    for p, second_id in ((arr, "line-4"), (lines, "line-2")):
        got = read_seed_prompts(p)
        assert [(o.id, o.risk_category, o.text) for o in got] == [
            ("a", "violence", "first"), (second_id, "sexual", "second"), (second_id, "self_harm", "second")]


@pytest.mark.parametrize("bad, field", [
    ({"messages": [{"role": "user", "content": "x"}]}, "metadata.target_harms"),
    (entry("x", "violence") | {"metadata": {"target_harms": [{"risk": "violence"}]}}, "target_harms[0].risk-type"),
    (entry("x", "weather"), "risk-type is 'weather'"),
    (entry("x", "violence") | {"messages": []}, "field messages"),
    (entry("x", "violence") | {"messages": [{"role": "system", "content": "x"}]}, "messages[0].role"),
    (entry("", "violence"), "messages[0].content"),
])
def test_a_bad_entry_is_refused_naming_file_line_and_field(tmp_path, bad, field):
    p = tmp_path / "seeds.jsonl"
    p.write_text(json.dumps(entry("fine", "violence")) + "\n\n" + json.dumps(bad) + "\n")
    with pytest.raises(UsageError) as e:
        read_seed_prompts(p)
    assert str(e.value).startswith(f"{p}: line 3: ") and field in str(e.value)


def test_a_repeated_id_is_refused_naming_both_lines(tmp_path):
    p = tmp_path / "seeds.jsonl"
    p.write_text(json.dumps(entry("one", "violence", id="x")) + "\n" + json.dumps(entry("two", "sexual", id="x"))
                 + "\n" + json.dumps(entry("three", "violence", id="x")) + "\n")
    with pytest.raises(UsageError, match=r"seeds.jsonl: line 3: field id 'x' repeats line 1's in violence"):
        read_seed_prompts(p)


def test_broken_json_is_named(tmp_path):
    p = tmp_path / "seeds.json"
    p.write_text('[{"messages": ]')
    with pytest.raises(UsageError, match="seeds.json: not JSON"):
        read_seed_prompts(p)


def test_choice_is_seeded_and_keeps_file_order():
    pool = read_seed_prompts(BUNDLED)
    a, b = load_objectives(["violence", "sexual"], 4, seed=1), load_objectives(["violence", "sexual"], 4, seed=1)
    assert a == b and [o.risk_category for o in a] == ["violence"] * 4 + ["sexual"] * 4
    order = [o.id for o in pool]
    assert [o.id for o in a[:4]] == sorted((o.id for o in a[:4]), key=order.index)
    others = [load_objectives(["violence"], 4, seed=s) for s in range(2, 8)]
    assert any(o != a[:4] for o in others)  # 495 ways to choose 4 of 12: some seed differs
    assert len(choose(pool, ["violence"], 50, 0)) == len([o for o in pool if o.risk_category == "violence"])
    with pytest.raises(UsageError, match="at least 1"):
        load_objectives(["violence"], 0)
