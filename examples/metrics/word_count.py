"""Code metrics: plain Python functions declared with @metric, computed on each row like the classic metrics."""
from evaluators import metric


@metric(name="word_count", fields=["response"], range=(0, 100000), higher_is_better=True, threshold=5)
def word_count(row):
    return float(len(row["response"].split()))


@metric(name="answer_shape", fields=["response"], range=(0, 1), threshold=0.5,
        outputs=["answer_shape", "answer_sentences"], description="Ends with a full stop; sentences counted")
def answer_shape(row):
    text = row["response"].strip()
    return {"answer_shape": 1.0 if text.endswith(".") else 0.0,
            "answer_sentences": float(sum(text.count(c) for c in ".!?"))}
