"""Small LLM apps instrumented as users instrument theirs, run against the loopback model (tests/judge_server.py).

``python -m tests.otel_apps CONFIG MODEL_URL OUT_DIR`` runs every scenario of one instrumentation
configuration (in a process of its own: instrumentations read their environment variables when they
instrument) with the real ``openai`` client and writes to OUT_DIR:

- ``traces.pb`` / ``logs.pb`` and ``traces.json`` / ``logs.json``: every span and log record made, encoded
  by the OTLP exporter's own encoder as protobuf and as OTLP JSON;
- ``expected.json``: per scenario, what the app sent and got (its trace id, the user's query, the model's
  answer, the tool calls and their results, the documents it retrieved...), from the app's side.

CONFIG is one of :data:`CONFIGS`. The loopback model answers the first call of each question of
:data:`TOOL_QUESTIONS` with a tool call (the test queues it); every other answer is text.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.otel_capture import JSON, PROTOBUF, Capture  # noqa: E402

# CONFIG -> the app's environment (set before instrumenting, as an app's deployment sets it)
CONFIGS = {
    "v2-span": {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"},
    "v2-event": {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
                 "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "EVENT_ONLY"},
    "v2-legacy": {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"},
    "v2-none": {},
    "openinference": {},
    "openinference-hidden": {"OPENINFERENCE_HIDE_INPUTS": "true", "OPENINFERENCE_HIDE_OUTPUTS": "true"},
    # OpenLLMetry captures content by default; the agent's own spans (util-genai's handler) are asked to
    "openllmetry": {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
                    "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"},
}
TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "The weather of a city now",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]
DOCS = [{"id": "kb-7", "content": "Paris is the capital of France.", "score": 0.91},
        {"id": "kb-2", "content": "Weather reports come from Météo-France.", "score": 0.42}]
WEATHER = "Sunny, 21 °C"
INSTRUCTIONS = "You are a weather assistant: answer with today's forecast."
# scenario -> its user question, to which the loopback model answers with a tool call (the test queues it)
TOOL_QUESTIONS = {"agent_genai": "What is the weather in Paris today?",
                  "tools_only": "Is it raining? Tell me the weather in Paris.",
                  "agent_openinference": "What is the weather in Paris for my walk?",
                  "openllmetry_attributes": "What is the weather in Paris this evening?"}


def instrument(config: str, cap: Capture) -> None:
    """Instrument the openai client as the configuration's app does."""
    if config.startswith("v2"):
        import opentelemetry.instrumentation.openai_v2 as v2

        if config == "v2-legacy":
            # opentelemetry-util-genai 1.1b0 (pinned: 2.4b0 needs it) always reports the latest conventions,
            # so an app on the earlier ones (util-genai < 1.0) is reproduced by asking for that mode: the
            # instrumentation's own earlier path (gen_ai.*.message and gen_ai.choice log events) then runs.
            v2.is_experimental_mode = lambda: False
        v2.OpenAIInstrumentor().instrument(tracer_provider=cap.tracer_provider, logger_provider=cap.logger_provider)
    elif config.startswith("openinference"):
        from openinference.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=cap.tracer_provider)
    elif config == "openllmetry":
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=cap.tracer_provider, logger_provider=cap.logger_provider)


def _trace_id(span) -> str:
    return f"{span.get_span_context().trace_id:032x}"


def simple(client, cap: Capture) -> dict:
    """One chat call, no span of the app's around it (the chat span is the root)."""
    query = "Which river runs through Paris?"
    reply = client.chat.completions.create(model="gpt-4o", messages=[
        {"role": "system", "content": "Answer in one sentence."}, {"role": "user", "content": query}])
    span = cap.finished_spans()[-1]
    return {"trace_id": _trace_id(span), "query": query, "response": reply.choices[0].message.content,
            "system": "Answer in one sentence.", "model": reply.model, "input_tokens": reply.usage.prompt_tokens,
            "output_tokens": reply.usage.completion_tokens, "span": span.name}


def multi_turn(client, cap: Capture) -> dict:
    """A chat call carrying the conversation so far, inside the app's request span."""
    tracer = cap.tracer_provider.get_tracer("shop.web")
    history = [{"role": "user", "content": "I ordered shoes last week."},
               {"role": "assistant", "content": "Thanks, I found order 1234."},
               {"role": "user", "content": "When will they arrive?"}]
    with tracer.start_as_current_span("POST /chat") as root:
        reply = client.chat.completions.create(model="gpt-4o-mini", messages=history)
    answer = reply.choices[0].message.content
    return {"trace_id": _trace_id(root), "query": history[-1]["content"], "response": answer,
            "conversation": history + [{"role": "assistant", "content": answer}]}


def _tool_loop(client, messages: list) -> tuple[list, dict]:
    """Ask with the tools offered: (the calls the model asked for, with the result the app will give each; the
    assistant message that asked, for the next call)."""
    first = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
    calls = []
    assistant = {"role": "assistant", "tool_calls": []}
    for call in first.choices[0].message.tool_calls:
        calls.append({"type": "tool_call", "tool_call_id": call.id, "name": call.function.name,
                      "arguments": json.loads(call.function.arguments), "tool_result": WEATHER})
        assistant["tool_calls"].append({"id": call.id, "type": "function",
                                        "function": {"name": call.function.name, "arguments": call.function.arguments}})
    return calls, assistant


def agent_genai(client, cap: Capture) -> dict:
    """An agent run recorded by opentelemetry-util-genai's handler (invoke_agent, retrieval, execute_tool
    spans) around two instrumented chat calls."""
    from opentelemetry.util.genai.handler import TelemetryHandler
    from opentelemetry.util.genai.types import FunctionToolDefinition, InputMessage, OutputMessage, Text

    handler = TelemetryHandler(tracer_provider=cap.tracer_provider, logger_provider=cap.logger_provider)
    question = TOOL_QUESTIONS["agent_genai"]
    fn = TOOLS[0]["function"]
    with handler.invoke_local_agent(agent_name="weather-agent") as agent:
        agent.conversation_id = "conv-42"
        agent.system_instruction = [Text(content=INSTRUCTIONS)]
        agent.input_messages = [InputMessage(role="user", parts=[Text(content=question)])]
        agent.tool_definitions = [FunctionToolDefinition(name=fn["name"], description=fn["description"],
                                                         parameters=fn["parameters"])]
        with handler.retrieval(data_source_id="kb") as retrieval:
            retrieval.query_text = question
            retrieval.documents = DOCS
        messages = [{"role": "user", "content": question}]
        calls, assistant = _tool_loop(client, messages)
        for call in calls:
            with handler.tool(call["name"], tool_call_id=call["tool_call_id"]) as run:
                run.arguments = call["arguments"]
                run.tool_result = WEATHER
        messages += [assistant] + [{"role": "tool", "tool_call_id": c["tool_call_id"], "content": WEATHER} for c in calls]
        final = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS)
        answer = final.choices[0].message.content
        agent.output_messages = [OutputMessage(role="assistant", parts=[Text(content=answer)], finish_reason="stop")]
        trace_id = f"{agent.span.get_span_context().trace_id:032x}"
    return {"trace_id": trace_id, "query": question, "response": answer, "tool_calls": calls,
            "tool_definitions": [fn], "context": DOCS, "conversation_id": "conv-42", "system_instructions": INSTRUCTIONS}


def tools_only(client, cap: Capture) -> dict:
    """A tool loop with no agent span (the earlier conventions' events carry the calls)."""
    tracer = cap.tracer_provider.get_tracer("shop.web")
    question = TOOL_QUESTIONS["tools_only"]
    with tracer.start_as_current_span("POST /ask") as root:
        messages = [{"role": "user", "content": question}]
        calls, assistant = _tool_loop(client, messages)
        messages += [assistant] + [{"role": "tool", "tool_call_id": c["tool_call_id"], "content": WEATHER} for c in calls]
        answer = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS).choices[0].message.content
    return {"trace_id": _trace_id(root), "query": question, "response": answer, "tool_calls": calls}


def agent_openinference(client, cap: Capture) -> dict:
    """An agent made with OpenInference's tracer: AGENT, RETRIEVER and TOOL spans, in a session."""
    from openinference.instrumentation import OITracer, TraceConfig, get_retriever_attributes, using_session

    tracer = OITracer(cap.tracer_provider.get_tracer("shop.agent"), config=TraceConfig())
    question = TOOL_QUESTIONS["agent_openinference"]
    with using_session("session-9"), tracer.start_as_current_span("weather agent", openinference_span_kind="agent") as agent:
        agent.set_input(question)
        with tracer.start_as_current_span("search kb", openinference_span_kind="retriever") as retriever:
            retriever.set_input(question)
            retriever.set_attributes(get_retriever_attributes(documents=DOCS))
        messages = [{"role": "user", "content": question}]
        calls, assistant = _tool_loop(client, messages)
        for call in calls:
            with tracer.start_as_current_span(call["name"], openinference_span_kind="tool") as tool:
                tool.set_tool(name=call["name"], parameters=call["arguments"])
                tool.set_input(json.dumps(call["arguments"]), mime_type="application/json")
                tool.set_output(WEATHER)
        messages += [assistant] + [{"role": "tool", "tool_call_id": c["tool_call_id"], "content": WEATHER} for c in calls]
        answer = client.chat.completions.create(model="gpt-4o", messages=messages, tools=TOOLS).choices[0].message.content
        agent.set_output(answer)
    return {"trace_id": _trace_id(agent), "query": question, "response": answer, "tool_calls": calls,
            "tool_definitions": [TOOLS[0]["function"]], "context": DOCS, "conversation_id": "session-9"}


def openllmetry_attributes(client, cap: Capture) -> dict:
    """A tool loop's two chat spans with OpenLLMetry's earlier indexed attributes (gen_ai.prompt.N.*,
    gen_ai.completion.N.*, llm.request.functions.N.*), set with the SDK's tracer under the attribute names of
    OpenLLMetry's own semantic-conventions package, from the real calls' requests and replies: its
    instrumentation (0.62) now writes the current GenAI attributes instead."""
    from opentelemetry.semconv_ai import SpanAttributes as SA

    tracer = cap.tracer_provider.get_tracer("opentelemetry.instrumentation.openai.v1", "0.47.0")
    question = TOOL_QUESTIONS["openllmetry_attributes"]
    fn = TOOLS[0]["function"]
    first = client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": question}], tools=TOOLS)
    call = first.choices[0].message.tool_calls[0]
    history = [{"role": "user", "content": question},
               {"role": "assistant", "tool_calls": [call.model_dump()]},
               {"role": "tool", "tool_call_id": call.id, "content": WEATHER}]
    final = client.chat.completions.create(model="gpt-4o", messages=history, tools=TOOLS)
    answer = final.choices[0].message.content
    common = {SA.LLM_REQUEST_TYPE: "chat", "gen_ai.system": "openai", "gen_ai.request.model": "gpt-4o",
              f"{SA.LLM_REQUEST_FUNCTIONS}.0.name": fn["name"],
              f"{SA.LLM_REQUEST_FUNCTIONS}.0.description": fn["description"],
              f"{SA.LLM_REQUEST_FUNCTIONS}.0.parameters": json.dumps(fn["parameters"])}
    # the two spans the earlier OpenLLMetry made for these calls, inside the app's request span
    with cap.tracer_provider.get_tracer("shop.web").start_as_current_span("POST /ask") as root:
        with tracer.start_as_current_span("openai.chat") as span:
            span.set_attributes({**common, "gen_ai.response.model": first.model,
                                 SA.LLM_USAGE_PROMPT_TOKENS: first.usage.prompt_tokens,
                                 SA.LLM_USAGE_COMPLETION_TOKENS: first.usage.completion_tokens,
                                 f"{SA.LLM_PROMPTS}.0.role": "user", f"{SA.LLM_PROMPTS}.0.content": question,
                                 f"{SA.LLM_COMPLETIONS}.0.role": "assistant",
                                 f"{SA.LLM_COMPLETIONS}.0.finish_reason": "tool_calls",
                                 f"{SA.LLM_COMPLETIONS}.0.tool_calls.0.id": call.id,
                                 f"{SA.LLM_COMPLETIONS}.0.tool_calls.0.name": call.function.name,
                                 f"{SA.LLM_COMPLETIONS}.0.tool_calls.0.arguments": call.function.arguments})
        with tracer.start_as_current_span("openai.chat") as span:
            span.set_attributes({**common, "gen_ai.response.model": final.model,
                                 SA.LLM_USAGE_PROMPT_TOKENS: final.usage.prompt_tokens,
                                 SA.LLM_USAGE_COMPLETION_TOKENS: final.usage.completion_tokens,
                                 f"{SA.LLM_PROMPTS}.0.role": "user", f"{SA.LLM_PROMPTS}.0.content": question,
                                 f"{SA.LLM_PROMPTS}.1.role": "assistant",
                                 f"{SA.LLM_PROMPTS}.1.tool_calls.0.id": call.id,
                                 f"{SA.LLM_PROMPTS}.1.tool_calls.0.name": call.function.name,
                                 f"{SA.LLM_PROMPTS}.1.tool_calls.0.arguments": call.function.arguments,
                                 f"{SA.LLM_PROMPTS}.2.role": "tool", f"{SA.LLM_PROMPTS}.2.tool_call_id": call.id,
                                 f"{SA.LLM_PROMPTS}.2.content": WEATHER,
                                 f"{SA.LLM_COMPLETIONS}.0.role": "assistant", f"{SA.LLM_COMPLETIONS}.0.finish_reason": "stop",
                                 f"{SA.LLM_COMPLETIONS}.0.content": answer})
    return {"trace_id": _trace_id(root), "query": question, "response": answer,
            "tool_calls": [{"type": "tool_call", "tool_call_id": call.id, "name": call.function.name,
                            "arguments": json.loads(call.function.arguments), "tool_result": WEATHER}],
            "tool_definitions": [fn], "model": final.model,
            "input_tokens": first.usage.prompt_tokens + final.usage.prompt_tokens,
            "output_tokens": first.usage.completion_tokens + final.usage.completion_tokens}


# CONFIG -> its scenarios (each makes one trace)
SCENARIOS = {
    "v2-span": [simple, multi_turn, agent_genai],
    "v2-event": [simple, agent_genai],
    "v2-legacy": [simple, tools_only],
    "v2-none": [simple],
    "openinference": [simple, multi_turn, agent_openinference],
    "openinference-hidden": [simple],
    "openllmetry": [agent_genai, openllmetry_attributes],
}



def main(config: str, url: str, out: str) -> None:
    import openai

    cap = Capture(service="weather-app", **{"service.version": "2.0.1"})
    instrument(config, cap)
    client = openai.OpenAI(base_url=url, api_key="sk-loopback", max_retries=0)
    expected = {fn.__name__: fn(client, cap) for fn in SCENARIOS[config]}
    folder = Path(out)
    folder.mkdir(parents=True, exist_ok=True)
    for content_type, suffix in ((PROTOBUF, "pb"), (JSON, "json")):
        (folder / f"traces.{suffix}").write_bytes(cap.traces(content_type))
        (folder / f"logs.{suffix}").write_bytes(cap.log_records(content_type))
    (folder / "expected.json").write_text(json.dumps(expected))


if __name__ == "__main__":  # the configuration's environment is the caller's to give (CONFIGS)
    main(*sys.argv[1:4])
