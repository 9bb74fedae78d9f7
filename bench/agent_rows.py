"""Made-up rows for ``bench/azure_sdk_agent_keys.py`` (and its test): each case says what it exercises.

Rows are in the SDK 1.18's own input format, so both sides read the same file. Judge metrics get their replies
from :func:`judge_reply`, in each metric's SDK output format, from a marker (``[case N]``) in the row's query:
the verdict depends on the metric and the row, never on the prompt's wording.
"""
from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path


def _qrels(*pairs):
    return [{"document_id": d, "query_relevance_label": label} for d, label in pairs]


def _docs(*pairs):
    return [{"document_id": d, "relevance_score": s} for d, s in pairs]


RETRIEVAL = [
    # ranked against labels 0-4, one unlabelled document (a hole)
    {"retrieval_ground_truth": _qrels(("a", 4), ("b", 2), ("c", 0), ("d", 1)),
     "retrieved_documents": _docs(("b", 9.5), ("x", 8.0), ("a", 7.25), ("d", 1.0))},
    # the ideal order, no holes
    {"retrieval_ground_truth": _qrels(("a", 3), ("b", 2), ("c", 1)),
     "retrieved_documents": _docs(("a", 0.9), ("b", 0.8), ("c", 0.7))},
    # nothing retrieved: every value 0
    {"retrieval_ground_truth": _qrels(("a", 2)), "retrieved_documents": []},
    # only unlabelled or irrelevant documents: holes only
    {"retrieval_ground_truth": _qrels(("a", 2), ("z", 0)),
     "retrieved_documents": _docs(("y", 3), ("z", 2), ("w", 1))},
    # equal scores (order as given), integer scores, one document
    {"retrieval_ground_truth": _qrels(("p", 1), ("q", 4), ("r", 3)),
     "retrieved_documents": _docs(("r", 5), ("p", 5), ("q", 2))},
    {"retrieval_ground_truth": _qrels(("m", 4)), "retrieved_documents": _docs(("m", 0.1))},
    # more than three retrieved, best last; fidelity over all of them
    {"retrieval_ground_truth": _qrels(("a", 1), ("b", 1), ("c", 2), ("d", 4), ("e", 3)),
     "retrieved_documents": _docs(("a", 0.99), ("b", 0.98), ("x", 0.97), ("c", 0.5), ("e", 0.4), ("d", 0.3))},
]


def _call(cid, name, **args):
    return {"type": "tool_call", "tool_call_id": cid, "name": name, "arguments": args}


def _assistant(*parts, text=None):
    content = ([{"type": "text", "text": text}] if text else []) + list(parts)
    return {"role": "assistant", "content": content}


def _tool(cid, result):
    return {"role": "tool", "tool_call_id": cid, "content": [{"type": "tool_result", "tool_result": result}]}


def _trip(*names):
    """A response calling ``names`` one after the other, each answered."""
    msgs = []
    for k, n in enumerate(names):
        cid = f"call_{k + 1}"
        msgs += [_assistant(_call(cid, n, step=k + 1)), _tool(cid, {"ok": True, "step": k + 1})]
    return msgs + [_assistant(text="Done.")]


NAVIGATION = [
    {"response": _trip("search_flights", "book_flight", "send_email"),
     "ground_truth": ["search_flights", "book_flight", "send_email"]},               # exact
    {"response": _trip("search_flights", "get_weather", "book_flight", "send_email"),
     "ground_truth": ["search_flights", "book_flight", "send_email"]},               # in order, one extra
    {"response": _trip("book_flight", "search_flights", "send_email"),
     "ground_truth": ["search_flights", "book_flight", "send_email"]},               # any order only
    {"response": _trip("search_flights", "search_flights"),
     "ground_truth": ["search_flights", "book_flight"]},                             # a repeat, one missing
    {"response": [_assistant(text="I cannot help with that.")], "ground_truth": ["lookup_order"]},  # no calls
    {"response": [_assistant(_call("c1", "lookup_order", id=7), _call("c2", "refund", id=7)),
                  _tool("c1", {"status": "shipped"}), _tool("c2", "Error: refund window closed")],
     "ground_truth": [" lookup_order", "refund "]},                                  # two calls in one message
]

RUNS: list[dict] = [
    {"name": "document_retrieval", "metric": "document_retrieval", "sdk_class": "DocumentRetrievalEvaluator",
     "rows": RETRIEVAL},
] + [
    {"name": f"task_navigation_efficiency.{mode}", "metric": "task_navigation_efficiency",
     "sdk_class": "azure.ai.evaluation._evaluators._task_navigation_efficiency._TaskNavigationEfficiencyEvaluator",
     "sdk_kwargs": {"matching_mode": mode}, "options": {"task_navigation_efficiency": {"matching_mode": mode}},
     "rows": NAVIGATION}
    for mode in ("exact_match", "in_order_match", "any_order_match")
]


TOOLS = [{"name": n, "description": d, "parameters": {"type": "object", "properties": {k: {"type": "string"} for k in ps}}}
         for n, d, ps in (("search_flights", "Find flights between two airports on a date.", ("origin", "dest", "date")),
                          ("book_flight", "Book a flight by its id.", ("flight_id",)),
                          ("send_email", "Email the user.", ("to", "body")),
                          ("lookup_order", "Look an order up by id.", ("order_id",)))]


def _agent_row(case: int, calls: list[tuple[str, dict, object]], final: str | None, gt: str, tools=TOOLS) -> dict:
    """A row whose query, tool-call arguments, final answer and ground truth carry the marker ``[case N]``."""
    mark = f"[case {case}]"
    query = [{"role": "system", "content": "You are a travel assistant. Never book without the user's consent."},
             {"role": "user", "content": [{"type": "text", "text": f"Find me a flight from Oslo to Rome on 3 May. {mark}"}]}]
    response = []
    for k, (name, args, result) in enumerate(calls, 1):
        cid = f"call_{case}_{k}"
        response += [_assistant(_call(cid, name, **args, note=mark)), _tool(cid, result)]
    if final is not None:
        response.append(_assistant(text=f"{final} {mark}"))
    return {"query": query, "response": response, "tool_definitions": tools, "ground_truth": f"{gt} {mark}"}


AGENT = [
    _agent_row(0, [("search_flights", {"origin": "OSL", "dest": "FCO", "date": "2026-05-03"},
                    {"flights": [{"id": "SK4711", "price": 129}]})],
               "SK4711 leaves at 09:10 for 129 EUR. Shall I book it?", "SK4711 at 09:10, 129 EUR."),
    _agent_row(1, [("search_flights", {"origin": "OSL", "dest": "FCO", "date": "2026-05-03"}, {"flights": []}),
                   ("search_flights", {"origin": "OSL", "dest": "CIA", "date": "2026-05-03"},
                    {"flights": [{"id": "FR100", "price": 39}]}),
                   ("book_flight", {"flight_id": "FR100"}, "Error: payment declined")],
               "I could not book FR100: the payment was declined.", "FR100 to Ciampino, 39 EUR."),
    _agent_row(2, [], "There are several flights; check an airline website.", "SK4711 at 09:10, 129 EUR."),
    _agent_row(3, [("lookup_weather", {"city": "Rome"}, {"temp": 21})], "It is 21 degrees in Rome.",
               "SK4711 at 09:10, 129 EUR."),                         # a tool with no definition
    _agent_row(4, [("search_flights", {"origin": "OSL", "dest": "FCO", "date": "2026-05-03"},
                    {"flights": [{"id": "SK4711", "price": 129}]})], None, "SK4711."),  # ends at a tool result
    {"query": "Say hello to the team. [case 5]", "response": "Hello, team! [case 5]", "tool_definitions": TOOLS,
     "ground_truth": "Hello team. [case 5]"},                         # text only
]
_INTERMEDIATE = _agent_row(6, [], None, "SK4711.")
_INTERMEDIATE["response"] = [_assistant({"type": "function_call", "name": "search_flights", "arguments": {}, "tool_call_id": "x",
                                         "call_id": "x"})]
AGENT.append(_INTERMEDIATE)                                           # stops at a pending call: not judged

# metric -> (SDK class, its scale): 1-5 or 0/1
JUDGED = {"intent_resolution": ("IntentResolutionEvaluator", (1, 5)),
          "task_adherence": ("TaskAdherenceEvaluator", (0, 1)),
          "task_completion": ("azure.ai.evaluation._evaluators._task_completion._TaskCompletionEvaluator", (0, 1)),
          "response_completeness": ("ResponseCompletenessEvaluator", (1, 5)),
          "tool_call_accuracy": ("ToolCallAccuracyEvaluator", (1, 5)),
          "tool_selection": ("azure.ai.evaluation._evaluators._tool_selection._ToolSelectionEvaluator", (0, 1)),
          "tool_input_accuracy": ("azure.ai.evaluation._evaluators._tool_input_accuracy._ToolInputAccuracyEvaluator",
                                  (0, 1)),
          "tool_call_success": ("_ToolCallSuccessEvaluator", (0, 1)),
          "tool_output_utilization": ("_ToolOutputUtilizationEvaluator", (0, 1))}
JUDGE_METRICS = set(JUDGED)
RUNS += [{"name": m, "metric": m, "sdk_class": cls, "rows": AGENT} for m, (cls, _) in JUDGED.items()]


def write_files(runs: list[dict], tmp: Path) -> None:
    """Each run's rows as a JSON-lines file (``run["file"]``); the rows leave the spec sent to the SDK."""
    for run in runs:
        path = tmp / f"{run['name']}.jsonl"
        path.write_text("".join(json.dumps({"id": f"r{k}", **r}, ensure_ascii=False) + "\n"
                                for k, r in enumerate(run.pop("rows"))), encoding="utf-8")
        run["file"] = str(path)


def case_of(prompt: str) -> int | None:
    m = re.search(r"\[case (\d+)\]", prompt)
    return int(m.group(1)) if m else None


def verdict(metric: str, case: int | None, low: int, high: int) -> int:
    """The loopback judge's verdict for a metric and a row: a hash of both, on the metric's scale."""
    h = int(hashlib.sha256(f"{metric}|{case}".encode()).hexdigest(), 16)
    return low + h % (high - low + 1)


def judge_reply(metric: str, prompt: str) -> str:
    """The loopback judge's reply in the SDK's agent output format: score, reason, status and properties."""
    case = case_of(prompt)
    low, high = JUDGED[metric][1]
    v = verdict(metric, case, low, high)
    # counts the SDK turns into tool_selection_accuracy and parameter_extraction_accuracy (case 2: none)
    n = case or 0
    props = {"bench_case": case, "correct_tool_selections": n % 3, "wrong_tool_selections": n % 2,
             "total_parameters_passed": 3 * (n % 3), "correct_parameters_passed": n % 3 + n % 2}
    return json.dumps({"reason": f"bench verdict {v} for case {case}", "score": v, "status": "completed",
                       "properties": props})
