"""An app as a team would instrument it (the docs' Monitoring page, docs/monitoring.md): the ``openai`` client, instrumented by
``opentelemetry-instrumentation-openai-v2``, exporting with ``opentelemetry-exporter-otlp-proto-http`` to the
receiver named by OTEL_EXPORTER_OTLP_ENDPOINT, the ingest token in OTEL_EXPORTER_OTLP_HEADERS (never on a command
line). Content capture as the environment says (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT). With
MONITOR_APP_INSTRUMENTATION=openinference, instrumented by ``openinference-instrumentation-openai`` instead (spans
only, content in its ``llm.*`` attributes).

    python tests/monitor_app.py MODEL_BASE_URL N OUT.jsonl

asks the model N questions and writes one line a call: the question and the answer the app got.
"""
from __future__ import annotations

import json
import os
import sys

import openai
from opentelemetry import _logs, trace
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor


def main(base_url: str, n: int, out: str) -> None:
    resource = Resource.create({"service.name": "monitor-test-app", "service.version": "1.2.3"})
    tracer_provider = TracerProvider(resource=resource)
    tracer_provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    trace.set_tracer_provider(tracer_provider)
    logger_provider = LoggerProvider(resource=resource)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(OTLPLogExporter()))
    _logs.set_logger_provider(logger_provider)
    if os.environ.get("MONITOR_APP_INSTRUMENTATION") == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor as OpenInference

        OpenInference().instrument(tracer_provider=tracer_provider)
    else:
        OpenAIInstrumentor().instrument(tracer_provider=tracer_provider, logger_provider=logger_provider)
    client = openai.OpenAI(base_url=base_url, api_key="sk-app-key-never-exported", max_retries=0)
    with open(out, "w", encoding="utf-8") as f:
        for i in range(n):
            question = f"Question {i}: what is {i} + {i}? «ünïcode» \"quoted\" <b>not html</b>"
            reply = client.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": question}])
            f.write(json.dumps({"query": question, "response": reply.choices[0].message.content}) + "\n")
    tracer_provider.shutdown()  # flushes what is batched; the exporter retries a 429/503 as OTLP says
    logger_provider.shutdown()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
