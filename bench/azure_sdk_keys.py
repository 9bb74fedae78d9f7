"""Side by side with the Azure AI Evaluation SDK 1.18: same rows, same keys, same values?

    python bench/azure_sdk_keys.py [--sdk-venv bench/.sdk-venv] [--nltk-data DIR]

Installs ``azure-ai-evaluation==1.18.*`` into a throwaway virtualenv (``bench/.sdk-venv``,
gitignored; the product never imports the SDK), then runs the SDK's ``evaluate()`` and ours on
the same files: the bundled single-turn sample plus rows with non-ASCII text, abbreviations and
several sentences (every metric that takes single-turn rows), and the bundled conversations in
the SDK's own ``{"conversation": {"messages": [...], "context": ...}}`` format (the judge
metrics). Judge metrics run against the loopback judge server (``tests/judge_server.py``), one
server per metric, reached by the SDK through ``OpenAIModelConfiguration(base_url=...)``. The
server's verdict depends on the metric and on the text being judged (the turn's response, or
its query for retrieval), never on the prompt's wording, so both sides get the same scores when
they judge the same thing; every prompt is also checked for which input fields it carries.

It reports every SDK key (rows and metrics) missing on our side and every value that differs,
sorted into: differences we chose and document (a conversation's verdict from the mean of its turns), values
that cannot be equal and are compared for presence and type instead, each bucket saying why (inside a judge
metric's ``<metric>_properties``: token counts of our own prompts; ``finish_reason`` until the runner records
it; a conversation turn's context in ``sample_input``), and anything else (unexpected; exit code 1).

NLTK data: the SDK downloads punkt, punkt_tab, perluniprops and wordnet at run time, which this
machine cannot. The SDK process (only) is patched not to download; punkt_tab and perluniprops are
written from the packages our own tokenizers use (``tests/sdk_reference.py``), or taken from
``--nltk-data DIR`` / ``NLTK_DATA``, and WordNet is assembled from the Debian ``wordnet-base``
files, so the SDK runs its published code on NLTK's own data.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SDK_REQ = "azure-ai-evaluation==1.18.*"
JUDGE_METRICS = ["coherence", "fluency", "groundedness", "relevance", "retrieval", "similarity"]
CLASSIC_METRICS = ["f1_score", "bleu", "gleu", "meteor", "rouge"]
CONVERSATION_METRICS = ["coherence", "fluency", "groundedness", "relevance", "retrieval"]
TOKENIZED = {"bleu", "gleu", "meteor"}  # values need NLTK's punkt/perluniprops on the SDK side
JUDGE_MODEL = "bench-judge"

# Single-turn rows the bundled sample lacks: non-ASCII characters (the SDK's NIST tokenizer
# path), abbreviations that a rule-based sentence splitter gets wrong, several sentences.
EXTRA_ROWS = [
    {"id": "x-01", "query": "Who discovered the vaccine?",
     "context": "Dr. Jonas Salk announced the polio vaccine in 1955. It was tested on 1.8 million children.",
     "response": "Dr. Salk announced it in 1955. It was tested on about 1.8 million children.",
     "ground_truth": "Dr. Jonas Salk announced the polio vaccine in 1955."},
    {"id": "x-02", "query": "What does the café serve?",
     "context": "The café serves crêpes, croissants and “pain au chocolat” — all baked on site.",
     "response": "It serves crêpes and croissants — baked on site.",
     "ground_truth": "The café serves crêpes, croissants and “pain au chocolat”, all baked on site."},
    {"id": "x-03", "query": "How tall is Mt. Everest?",
     "context": "Mt. Everest is 8,849 m tall. The 2020 survey by China and Nepal set that figure.",
     "response": "Mt. Everest stands 8,849 m. That figure comes from a 2020 survey. Earlier surveys said 8,848 m.",
     "ground_truth": "It is 8,849 m tall, per the 2020 survey by China and Nepal."},
    {"id": "x-04", "query": "Is the museum open on Mondays?",
     "context": "The museum is closed on Mondays. On other days it opens at 9 a.m. and closes at 5 p.m.",
     "response": "No, it's closed Mondays; otherwise it's open 9 a.m. to 5 p.m. \"Late nights\" run on Fridays.",
     "ground_truth": "No. It is closed on Mondays and open 9 a.m. to 5 p.m. on other days."},
    {"id": "x-05", "query": "Where is Zürich's main station?",
     "context": "Zürich Hauptbahnhof lies at the north end of the Bahnhofstrasse, near the Limmat river.",
     "response": "Zürich HB is at the north end of Bahnhofstraße, by the Limmat.",
     "ground_truth": "At the north end of the Bahnhofstrasse, near the Limmat."},
    {"id": "x-06", "query": "What did the U.S. report say?",
     "context": "The U.S. report, published Jan. 5, found emissions fell 2%. Analysts expected 1%.",
     "response": "The U.S. report (Jan. 5) found a 2% fall in emissions. Analysts had expected 1%. It was a surprise.",
     "ground_truth": "Emissions fell 2%, more than the 1% analysts expected."},
]


# ============================================================== the SDK side (runs in the SDK venv)

def sdk_side(spec_path: str) -> None:
    """Run the SDK's evaluate() as the spec says; write rows and metrics as JSON."""
    spec = json.loads(Path(spec_path).read_text())
    note = _prepare_nltk(spec.get("nltk_data"))
    from azure.ai.evaluation import (BleuScoreEvaluator, CoherenceEvaluator, F1ScoreEvaluator, FluencyEvaluator,
                                     GleuScoreEvaluator, GroundednessEvaluator, MeteorScoreEvaluator,
                                     OpenAIModelConfiguration, RelevanceEvaluator, RetrievalEvaluator,
                                     RougeScoreEvaluator, RougeType, SimilarityEvaluator, evaluate)

    judges = {"coherence": CoherenceEvaluator, "fluency": FluencyEvaluator, "groundedness": GroundednessEvaluator,
              "relevance": RelevanceEvaluator, "retrieval": RetrievalEvaluator, "similarity": SimilarityEvaluator}
    classic = {"f1_score": F1ScoreEvaluator, "bleu": BleuScoreEvaluator, "gleu": GleuScoreEvaluator,
               "meteor": MeteorScoreEvaluator, "rouge": lambda: RougeScoreEvaluator(RougeType.ROUGE_L)}
    from importlib.metadata import version

    out = {"version": version("azure-ai-evaluation"), "nltk": note, "runs": {}}
    for name, data in spec["files"].items():
        evaluators = {}
        for m in spec["metrics"][name]:
            if m in judges:
                cfg = OpenAIModelConfiguration(type="openai", base_url=spec["judge_urls"][m], api_key="bench-key",
                                               model=JUDGE_MODEL)
                evaluators[m] = judges[m](cfg)
            else:
                evaluators[m] = classic[m]()
        t = time.perf_counter()
        res = evaluate(data=data, evaluators=evaluators, output_path=str(Path(spec["out"]).with_suffix(f".{name}.json")))
        out["runs"][name] = {"rows": _plain(res["rows"]), "metrics": _plain(res["metrics"]),
                             "seconds": time.perf_counter() - t}
    Path(spec["out"]).write_text(json.dumps(out, default=str))


def _plain(v):
    """numpy/pandas values -> JSON values (NaN -> None)."""
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if hasattr(v, "item") and not isinstance(v, (str, bytes)):
        try:
            v = v.item()
        except (ValueError, AttributeError):
            return [_plain(x) for x in v.tolist()]
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


def _prepare_nltk(nltk_data: str | None) -> str:
    """No downloads in the SDK process; say which classic values can be trusted."""
    import nltk
    import azure.ai.evaluation._common.utils as u

    if nltk_data:
        nltk.data.path.insert(0, nltk_data)
    u.ensure_nltk_data_downloaded = lambda: None
    import azure.ai.evaluation._evaluators._meteor._meteor as met

    met.ensure_nltk_data_downloaded = lambda: None
    missing = []
    try:
        nltk.word_tokenize("Dr. Smith came. He left.")
    except LookupError:
        missing.append("punkt_tab")
    try:
        from nltk.tokenize.nist import NISTTokenizer

        NISTTokenizer().international_tokenize("café")
    except LookupError:
        missing.append("perluniprops")
    try:
        from nltk.corpus import wordnet

        wordnet.synsets("dog")
    except LookupError:
        wn = Path("/usr/share/wordnet")
        if not wn.is_dir():
            missing.append("wordnet")
        else:  # the Debian package is WordNet 3.0, as NLTK's; only the lexnames file is absent
            root = Path(tempfile.mkdtemp()) / "corpora" / "wordnet"
            root.mkdir(parents=True)
            import shutil

            for f in wn.iterdir():  # copies: NLTK refuses files that resolve outside its root
                shutil.copyfile(f, root / f.name)
            (root / "lexnames").write_text(Path(os.environ["EVALDASH_LEXNAMES"]).read_text())
            nltk.data.path.insert(0, str(root.parent.parent))
            from nltk.corpus import wordnet

            wordnet.synsets("dog")
    if {"punkt_tab", "perluniprops"} & set(missing):
        import re

        def split(text: str) -> list[str]:
            return re.findall(r"\w+|[^\w\s]", text)

        for mod in ("_bleu._bleu", "_gleu._gleu", "_meteor._meteor"):
            m = __import__(f"azure.ai.evaluation._evaluators.{mod}", fromlist=["x"])
            m.nltk_tokenize = split
        u.nltk_tokenize = split
        return f"stubbed tokenizer (missing NLTK data: {', '.join(missing)})"
    return "real NLTK data" + (f" (missing: {', '.join(missing)})" if missing else "")


# ============================================================== our side and the comparison

def ensure_sdk(venv: Path) -> Path:
    py = venv / "bin" / "python"
    probe = [str(py), "-c", "import azure.ai.evaluation, importlib.metadata as m; "
                            "print(m.version('azure-ai-evaluation'))"]
    if py.exists():
        p = subprocess.run(probe, capture_output=True, text=True)
        if p.returncode == 0 and p.stdout.startswith("1.18."):
            return py
    print(f"installing {SDK_REQ} into {venv} (once) ...", flush=True)
    subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True)
    subprocess.run([str(py), "-m", "pip", "install", "-q", SDK_REQ], check=True)
    return py


def build_files(tmp: Path) -> dict[str, Path]:
    single = [json.loads(line) for line in (ROOT / "data" / "rag_single_turn.jsonl").read_text().splitlines() if line]
    single += EXTRA_ROWS
    conversations = []
    for line in (ROOT / "data" / "support_conversations.jsonl").read_text().splitlines():
        if not line:
            continue
        rec = json.loads(line)
        msgs = [m for m in rec["messages"] if m["role"] in ("user", "assistant")]
        # a conversation-wide context, so every turn has documents on both sides
        conversations.append({"conversation_id": rec["conversation_id"],
                              "conversation": {"messages": msgs,
                                               "context": f"Support knowledge base, case {rec['conversation_id']}."}})
    files = {"single": tmp / "single.jsonl", "conversations": tmp / "conversations.jsonl"}
    files["single"].write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in single), encoding="utf-8")
    files["conversations"].write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in conversations),
                                      encoding="utf-8")
    return files


def anchors(files: dict[str, Path]) -> dict[str, list[dict]]:
    """Per judged unit: its query, response, context and ground truth (what a prompt may carry)."""
    units = []
    for line in files["single"].read_text(encoding="utf-8").splitlines():
        r = json.loads(line)
        units.append({k: r.get(k) for k in ("query", "response", "context", "ground_truth")})
    for line in files["conversations"].read_text(encoding="utf-8").splitlines():
        conv = json.loads(line)["conversation"]
        user = None
        for m in conv["messages"]:
            if m["role"] == "user":
                user = m["content"]
            elif m["role"] == "assistant":
                cites = (m.get("context") or {}).get("citations", [])
                units.append({"query": user, "response": m["content"],
                              "context": cites[0]["content"] if cites else conv["context"],
                              "ground_truth": m.get("ground_truth")})
    return units


def responder_for(metric: str, units: list[dict]):
    """Scores from (metric, the text judged): the longest known response (query for retrieval) in the prompt."""
    import hashlib

    key = "query" if metric == "retrieval" else "response"
    texts = sorted({u[key] for u in units if u[key]}, key=len, reverse=True)

    def respond(prompt: str, request: dict) -> str:
        anchor = next((t for t in texts if t in prompt), None)
        if anchor is None:
            return json.dumps({"reason": "bench: no known text in the prompt", "score": 1})
        score = 1 + int(hashlib.sha256(f"{metric}|{anchor}".encode()).hexdigest(), 16) % 5
        return json.dumps({"reason": f"bench verdict {score}", "score": score})

    return respond


def fields_seen(prompts: list[str], units: list[dict], metric: str) -> dict[str, set]:
    """For each judged text, which input fields its prompt carried (a field counts when its text
    appears; for a context, its first 40 characters, since the SDK writes a conversation's context
    as a Python dict)."""
    key = "query" if metric == "retrieval" else "response"
    out: dict[str, set] = {}
    for p in prompts:
        unit = max((u for u in units if u[key] and u[key] in p), key=lambda u: len(u[key]), default=None)
        if unit is None:
            continue
        seen = set()
        for f in ("query", "response", "context", "ground_truth"):
            v = unit.get(f)
            if isinstance(v, str) and v and (v in p or (f == "context" and v[:40] in p)):
                seen.add(f)
        out.setdefault(unit[key], set()).update(seen)
    return out


def run_ours(files, metrics, urls, tmp: Path) -> dict:
    sys.path.insert(0, str(ROOT))
    from evaluators import JudgeConfig, Store, evaluate

    runs = {}
    for name, path in files.items():
        t = time.perf_counter()
        rows: list[dict] = []
        flat: dict = {}
        store = Store(f"sqlite:///{tmp / f'ours-{name}.db'}")
        classic = [m for m in metrics[name] if m not in JUDGE_METRICS]
        batches = ([(classic, None)] if classic else []) + [
            ([m], JudgeConfig(model=JUDGE_MODEL, provider="compatible", base_url=urls[m]))
            for m in metrics[name] if m in JUDGE_METRICS]
        for ms, judge in batches:
            res = evaluate(str(path), ms, judge=judge, store=store)
            part = res.results.rows()
            rows = part if not rows else [{**a, **b} for a, b in zip(rows, part)]
            flat.update(res.metrics)
        runs[name] = {"rows": json.loads(json.dumps(rows, default=str)), "metrics": flat,
                      "seconds": time.perf_counter() - t}
    return runs


def same(a, b) -> bool:
    if a is None or b is None:
        return (a is None or a != a) and (b is None or b != b)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-9 * max(1.0, abs(a))
    return a == b


def diff(path: str, sdk, ours, out: list) -> None:
    """Every key of ``sdk`` missing from ``ours`` and every value that differs, as (path, what, SDK value, ours)."""
    if isinstance(sdk, dict) and isinstance(ours, dict):
        for k, v in sdk.items():
            if k not in ours:
                out.append((f"{path}.{k}", "missing", v, None))
            else:
                diff(f"{path}.{k}", v, ours[k], out)
    elif isinstance(sdk, list) and isinstance(ours, list) and len(sdk) == len(ours):
        for i, (a, b) in enumerate(zip(sdk, ours)):
            diff(f"{path}[{i}]", a, b, out)
    elif not same(sdk, ours):
        out.append((path, f"SDK {sdk!r:.60} != ours {ours!r:.60}", sdk, ours))


TOKEN_KEYS = ("prompt_tokens", "completion_tokens", "total_tokens")
# Why a judge metric's <metric>_properties values cannot all be equal (presence and type are checked instead).
WHY_TOKENS = ("judge token counts: presence and type (int) compared, not values: they count our own prompts' "
              "tokens (ours are our words, shorter than the SDK's), and a conversation's row sums its turns")
WHY_FINISH = ("finish_reason: presence and type (str) compared; ours is '' (not reported) until the runner records "
              "the reply's finish_reason in Result.meta")
WHY_CONTEXT = ("sample_input of a conversation turn: same fields in the same order, query and response equal; its "
               "context is the text our judge was given (the conversation's and the turn's documents), the SDK's "
               "the Python repr of its context dict")


def _sample_fields(text):
    """sample_input JSON -> its fields dict (None when it is not the SDK's shape)."""
    try:
        msgs = json.loads(text)
        if isinstance(msgs, list) and len(msgs) == 1 and msgs[0].get("role") == "user":
            fields = json.loads(msgs[0]["content"])
            return fields if isinstance(fields, dict) else None
    except (TypeError, ValueError, KeyError, AttributeError):
        return None
    return None


def classify(file: str, key: str, what: str, sdk_v, ours_v, nltk_real: bool) -> str:
    """Which bucket a difference belongs to (see the module docstring); "UNEXPECTED" fails the check."""
    parts = key.split(".")
    metric = parts[1] if key.startswith("outputs.") else parts[0]
    leaf = key.rsplit(".", 1)[-1].split("[")[0]
    if metric in TOKENIZED and what != "missing" and not nltk_real:
        return "classic value not compared (SDK tokenizer stubbed: NLTK data unavailable offline)"
    if what == "missing":
        return "UNEXPECTED"
    if "_properties" in key and metric in JUDGE_METRICS:
        if leaf in TOKEN_KEYS:
            ok = all(isinstance(v, int) and not isinstance(v, bool) for v in (sdk_v, ours_v))
            return WHY_TOKENS if ok else "UNEXPECTED"
        if leaf == "finish_reason":
            return WHY_FINISH if isinstance(sdk_v, str) and ours_v == "" else "UNEXPECTED"
        if leaf == "sample_input" and file == "conversations":
            a, b = _sample_fields(sdk_v), _sample_fields(ours_v)
            ok = (a is not None and b is not None and list(a) == list(b) and "context" in a
                  and all(a[k] == b[k] for k in a if k != "context") and isinstance(b["context"], str))
            return WHY_CONTEXT if ok else "UNEXPECTED"
    if file == "conversations" and "evaluation_per_turn" not in key and (
            leaf.endswith(("_passed", "_result", "_reason")) or leaf == "binary_aggregate"):
        return "conversation verdict from the mean of turns (documented; SDK: last turn / share of turns)"
    return "UNEXPECTED"


def dump(folder: Path, sdk, ours) -> None:
    """``--dump``: both sides' rows and metrics, as JSON files in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sdk.json").write_text(json.dumps(sdk, ensure_ascii=False, indent=1))
    (folder / "ours.json").write_text(json.dumps(ours, ensure_ascii=False, indent=1, default=str))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sdk-venv", default=str(ROOT / "bench" / ".sdk-venv"))
    ap.add_argument("--nltk-data", default=os.environ.get("NLTK_DATA"))
    ap.add_argument("--dump", metavar="DIR", help="also write both sides' rows and metrics there (sdk.json, ours.json)")
    ap.add_argument("--sdk-side", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.sdk_side:
        return sdk_side(args.sdk_side)
    sys.path.insert(0, str(ROOT))
    from tests.judge_server import JudgeServer

    if not args.nltk_data:  # NLTK's own data, written from the packages our tokenizers use
        from tests.sdk_reference import nltk_data_root

        args.nltk_data = nltk_data_root()
    started = time.perf_counter()
    py = ensure_sdk(Path(args.sdk_venv))
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        files = build_files(tmp)
        units = anchors(files)
        metrics = {"single": JUDGE_METRICS + CLASSIC_METRICS, "conversations": CONVERSATION_METRICS}
        servers = {m: JudgeServer(responder_for(m, units)).__enter__() for m in JUDGE_METRICS}
        try:
            urls = {m: s.url for m, s in servers.items()}
            spec = {"files": {k: str(v) for k, v in files.items()}, "metrics": metrics, "judge_urls": urls,
                    "out": str(tmp / "sdk.json"), "nltk_data": args.nltk_data}
            (tmp / "spec.json").write_text(json.dumps(spec))
            env = {**os.environ, "EVALDASH_LEXNAMES": str(ROOT / "evaluators" / "metrics" / "wordnet_lexnames.txt"),
                   "PF_DISABLE_TRACING": "true", "AZURE_EVALUATION_DISABLE_TELEMETRY": "true"}
            p = subprocess.run([str(py), __file__, "--sdk-side", str(tmp / "spec.json")], env=env, cwd=tmp,
                               capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit(f"the SDK run failed:\n{p.stderr[-4000:]}")
            sdk = json.loads((tmp / "sdk.json").read_text())
            sdk_prompts = {m: s.prompts() for m, s in servers.items()}
            before = {m: len(s.calls) for m, s in servers.items()}
            os.environ.setdefault("EVAL_HOME", str(tmp / "home"))
            ours = run_ours(files, metrics, urls, tmp)
            our_prompts = {m: s.prompts()[before[m]:] for m, s in servers.items()}
        finally:
            for s in servers.values():
                s.__exit__(None, None, None)
    if args.dump:
        dump(Path(args.dump), sdk, ours)
    report(sdk, ours, sdk_prompts, our_prompts, units, time.perf_counter() - started)


def report(sdk, ours, sdk_prompts, our_prompts, units, seconds) -> None:
    nltk_real = sdk["nltk"].startswith("real")
    print(f"azure-ai-evaluation {sdk['version']} vs evaldash; SDK NLTK: {sdk['nltk']}")
    buckets: dict[str, list] = {}
    top_keys: dict[str, set] = {}
    sdk_keys = 0
    for file in ("single", "conversations"):
        s_run, o_run = sdk["runs"][file], ours[file]
        top_keys[file] = {k for r in s_run["rows"] for k in r} | set(s_run["metrics"])
        print(f"\n{file}: {len(s_run['rows'])} rows; SDK {s_run['seconds']:.1f} s, ours {o_run['seconds']:.1f} s")
        found: list = []
        for i, (a, b) in enumerate(zip(s_run["rows"], o_run["rows"])):
            sdk_keys += len(a)
            diff(f"row{i}", a, b, found)
        diff("metrics", s_run["metrics"], o_run["metrics"], found)
        sdk_keys += len(s_run["metrics"])
        for path, what, sdk_v, ours_v in found:
            key = path.split(".", 1)[1]
            buckets.setdefault(classify(file, key, what, sdk_v, ours_v, nltk_real), []).append((file, path, what))
        rowkeys = sorted({k for r in s_run["rows"] for k in r})
        print(f"  SDK row keys: {len(rowkeys)}; metrics.json keys: {len(s_run['metrics'])}")
    print(f"\nSDK keys checked (rows x keys + metrics): {sdk_keys}")
    for name in sorted(buckets, key=lambda b: (b == "UNEXPECTED", b)):
        items = buckets[name]
        keys = sorted({_generic(p) for _, p, _ in items})
        print(f"\n[{name}] {len(items)} difference(s) in {len(keys)} key(s):")
        for k in keys[:12]:
            ex = next(w for f, p, w in items if _generic(p) == k)
            print(f"  {k}: {ex}")
        if len(keys) > 12:
            print(f"  ... and {len(keys) - 12} more")
    print("\ninput fields in each judge metric's prompts (judged texts whose prompt carries the field):")
    for m in JUDGE_METRICS:
        s, o = fields_seen(sdk_prompts[m], units, m), fields_seen(our_prompts[m], units, m)
        common = set(s) & set(o)
        parts = []
        for f in ("query", "response", "context", "ground_truth"):
            ns, no = sum(f in s[k] for k in common), sum(f in o[k] for k in common)
            parts.append(f"{f} {ns}/{no}")
        print(f"  {m:<13} SDK/ours over {len(common)} texts ({len(sdk_prompts[m])}/{len(our_prompts[m])} calls): "
              + ", ".join(parts))
    # judge calls recorded in <metric>_properties: how many of the SDK's are equal on our side
    differing = {(f, p) for b in buckets.values() for f, p, w in b}
    for leaf in ("sample_input", "sample_output", "finish_reason", "model"):
        total = equal = 0
        for file in ("single", "conversations"):
            for i, row in enumerate(sdk["runs"][file]["rows"]):
                for path in _leaf_paths(f"row{i}", row, leaf):
                    total += 1
                    equal += (file, path) not in differing
        print(f"{leaf} in judge properties: {equal} of {total} equal to the SDK's")
    unexpected = len(buckets.get("UNEXPECTED", []))
    missing = [(f, p) for b in buckets.values() for f, p, w in b if w == "missing"]
    top = [p for f, p in missing if p.split(".", 1)[1] in top_keys[f]]
    print(f"\nSDK row and metrics.json keys missing on our side: {len(top)}; "
          f"keys missing inside a value (<metric>_properties): {len(missing) - len(top)}")
    print(f"unexpected differences: {unexpected}; took {seconds:.0f} s")
    sys.exit(1 if unexpected else 0)


def _leaf_paths(path: str, value, leaf: str):
    """Paths (as :func:`diff` writes them) of every ``leaf`` key inside ``value``."""
    if isinstance(value, dict):
        for k, v in value.items():
            if k == leaf:
                yield f"{path}.{k}"
            else:
                yield from _leaf_paths(f"{path}.{k}", v, leaf)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _leaf_paths(f"{path}[{i}]", v, leaf)


def _generic(path: str) -> str:
    """row12.outputs.x.y[3].z -> outputs.x.y[].z (one line per key, not per row)."""
    import re

    head, _, rest = path.partition(".")
    rest = re.sub(r"\[\d+\]", "[]", rest)
    return rest if head.startswith("row") else f"{head}.{rest}"


if __name__ == "__main__":
    main()
