"""Tool-calling conversations for render_goldens.py, written as an OpenAI-compatible server receives them.

Each case is (tools, messages): `tools` is the request's OpenAI function list (or None), messages use
OpenAI's fields (assistant `tool_calls` with `arguments` as a JSON string, `role: "tool"` results with
`tool_call_id` and/or `name`, `reasoning_content` on assistant messages). to_template_messages()
turns them into what the Gemma 4 template reads, as vLLM does before applying it: the arguments
string parsed into a mapping.
"""
import copy
import json

WEATHER = {"type": "function", "function": {
    "name": "get_weather",
    "description": "Get the current weather for a city.",
    "parameters": {
        "type": "object",
        "properties": {
            "location": {"type": "string", "description": "City name, e.g. Paris"},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "description": "Temperature unit"},
        },
        "required": ["location"],
    },
}}

SEARCH = {"type": "function", "function": {
    "name": "search_web",
    "description": "Search the web and return the top results.",
    "parameters": {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "What to search for"},
            "max_results": {"type": "integer", "description": "How many results (1-10)"},
            "safe": {"type": "boolean"},
            "Language": {"type": "string", "description": "Upper-case key: dictsort ignores case"},
        },
        "required": ["query"],
    },
}}

TIME = {"type": "function", "function": {
    "name": "get_time",
    "description": "The current time in UTC.",
    "parameters": {"type": "object", "properties": {}},
}}

PING = {"type": "function", "function": {"name": "ping", "description": "Check that the service is up."}}

EVENT = {"type": "function", "function": {
    "name": "create_event",
    "description": "Create a calendar event.",
    "parameters": {
        "type": "object",
        "properties": {
            "title": {"type": "string", "description": "Short title"},
            "attendees": {
                "type": "array",
                "description": "People invited",
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string"},
                        "email": {"type": "string", "description": "Work address"},
                        "role": {"type": "string", "enum": ["required", "optional"]},
                    },
                    "required": ["name", "email"],
                },
            },
            "location": {
                "type": "object",
                "description": "Where",
                "properties": {
                    "city": {"type": "string"},
                    "country": {"type": "string", "description": "ISO code"},
                    "coordinates": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}}},
                },
                "required": ["city"],
            },
            "tags": {"type": "array", "items": {"type": "string"}},
            "priority": {"type": "string", "enum": ["low", "normal", "high"]},
            "all_day": {"type": "boolean", "description": "No start and end times"},
            "reminder_minutes": {"type": "integer", "nullable": True, "description": "Minutes before; null for none"},
            "matrix": {"type": "array", "items": {"type": "array", "items": {"type": "number"}}},
            "metadata": {"type": "object", "additionalProperties": {"type": "string"}},
            "weights": {"type": "array", "items": {"type": "number", "description": "0 to 1", "minimum": 0, "maximum": 1.5}},
        },
        "required": ["title", "attendees"],
    },
}}

# Chinese names and descriptions, a union type, a property named like a schema keyword (the template
# skips it), a response declaration, an enum of numbers, no parameter type.
ODD = [
    {"type": "function", "function": {
        "name": "translate",
        "description": "把文本翻译成目标语言。",
        "parameters": {
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "要翻译的文本"},
                "目标语言": {"type": "string", "enum": ["英语", "法语"]},
                "note": {"type": ["string", "null"], "description": "union type"},
                "type": {"type": "string", "description": "skipped by the template"},
                "level": {"type": "integer", "enum": [1, 2, 3]},
            },
            "required": ["text", "目标语言"],
        },
        "response": {"type": "object", "description": "The translation"},
    }},
    {"type": "function", "function": {
        "name": "untyped",
        "description": "Parameters without a type.",
        "parameters": {"properties": {"x": {"type": "number"}}, "required": ["x"]},
    }},
    {"type": "function", "function": {
        "name": "shapes",
        "description": 42,
        "parameters": {
            "type": "object",
            "properties": {
                "mixed": {"type": "array", "items": {"type": ["string", "number"], "enum": ["a", 1, None, True]}},
                "opts": {"type": "object", "nullable": True, "properties": {"k": {"type": "string"}}, "required": ["k"]},
                "empty_items": {"type": "array", "items": {}},
                "no_type": {"description": "a property without a type"},
                "free": {"type": "object"},
            },
        },
    }},
    {"type": "function", "function": {"name": "bare", "parameters": {}}},
]


def call(call_id, name, arguments):
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments, ensure_ascii=False)}}


U = "user"
WEATHER_CALL = call("call_1", "get_weather", {"location": "Paris", "unit": "celsius"})
WEATHER_RESULT = {"role": "tool", "tool_call_id": "call_1", "content": '{"temperature": 15, "condition": "cloudy"}'}

TRICKY_ARGS = {
    "query": "天气 in 北京, \"quoted\" {braces}: [x]",
    "max_results": 3,
    "offset": -2,
    "ratio": 0.25,
    "tiny": 1e-05,
    "big": 1e16,
    "whole": 2.0,
    "safe": True,
    "strict": False,
    "cursor": None,
    "filters": {"site": "example.com", "years": [2023, 2024], "nested": {"deep": [{"a": "b"}, []], "empty": {}}},
    "Zeta": "upper-case key",
    "zeta": "same key but for case: dictsort keeps the written order",
    "multi\nline": "key with a newline",
}

TOOL_CONVERSATIONS = {
    "tool_one": ([WEATHER], [{"role": U, "content": "What's the weather in Paris?"}]),
    "tool_several": ([WEATHER, SEARCH, TIME, PING], [{"role": U, "content": "Find news about the Paris weather."}]),
    "tool_nested_schema": ([EVENT], [{"role": U, "content": "Book a team lunch on Friday."}]),
    "tool_odd_schemas": (ODD, [{"role": U, "content": "把“你好”翻译成英语。"}]),
    "tool_system": ([WEATHER, TIME], [
        {"role": "system", "content": "You are a helpful assistant with tools.\n"},
        {"role": U, "content": "What time is it?"},
    ]),
    "tool_call_pending": ([WEATHER], [
        {"role": U, "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [WEATHER_CALL]},
    ]),
    "tool_result_last": ([WEATHER], [
        {"role": U, "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [WEATHER_CALL]},
        WEATHER_RESULT,
    ]),
    # Results answered and content after them in one message: the template then writes no generation prompt.
    "tool_call_content_last": ([WEATHER], [
        {"role": U, "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "Checking the forecast.", "tool_calls": [WEATHER_CALL]},
        WEATHER_RESULT,
    ]),
    "tool_round_trip": ([WEATHER], [
        {"role": U, "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [WEATHER_CALL]},
        WEATHER_RESULT,
        {"role": "assistant", "content": "It is 15 °C and cloudy in Paris."},
        {"role": U, "content": "Thanks! And in London?"},
    ]),
    "tool_round_trip_system": ([WEATHER, SEARCH], [
        {"role": "system", "content": "Use tools when they help."},
        {"role": U, "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [WEATHER_CALL]},
        WEATHER_RESULT,
        {"role": "assistant", "content": "<|channel>thought\nSummarise.<channel|>15 °C, cloudy."},
        {"role": U, "content": "Great."},
    ]),
    "tool_parallel": ([WEATHER, TIME], [
        {"role": U, "content": "Weather in Paris and the time, please."},
        {"role": "assistant", "content": None, "tool_calls": [WEATHER_CALL, call("call_2", "get_time", {})]},
        {"role": "tool", "tool_call_id": "call_2", "content": "12:00"},
        WEATHER_RESULT,
        {"role": "assistant", "content": "15 °C and cloudy; it is noon UTC."},
    ]),
    "tool_multi_step": ([WEATHER, SEARCH], [
        {"role": U, "content": "Is it warmer in Paris or Rome?"},
        {"role": "assistant", "content": None, "tool_calls": [WEATHER_CALL]},
        WEATHER_RESULT,
        {"role": "assistant", "content": None, "tool_calls": [call("call_3", "get_weather", {"location": "Rome"})]},
        {"role": "tool", "tool_call_id": "call_3", "content": '{"temperature": 21}'},
        {"role": "assistant", "content": "Rome is warmer (21 °C vs 15 °C)."},
    ]),
    "tool_result_by_name": ([TIME], [
        {"role": U, "content": "Time?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
        {"role": "tool", "name": "get_time", "content": "  12:00 \n"},
    ]),
    "tool_result_unmatched_id": ([WEATHER, TIME], [
        {"role": U, "content": "Time?"},
        {"role": "assistant", "content": None, "tool_calls": [call("call_9", "get_time", {})]},
        {"role": "tool", "tool_call_id": "call_other", "name": "get_time", "content": "12:00"},
    ]),
    "tool_result_no_name": ([TIME], [
        {"role": U, "content": "Time?"},
        {"role": "assistant", "content": None, "tool_calls": [call("call_9", "get_time", {})]},
        {"role": "tool", "tool_call_id": "call_other", "content": "12:00"},
    ]),
    "tool_tricky_arguments": ([SEARCH], [
        {"role": U, "content": "搜索北京的天气"},
        {"role": "assistant", "content": None, "tool_calls": [call("call_1", "search_web", TRICKY_ARGS)]},
        {"role": "tool", "tool_call_id": "call_1", "content": "结果：晴，25°C, {\"ok\": true}"},
        {"role": "assistant", "content": "北京今天晴，25°C。"},
    ]),
    "tool_reasoning": ([WEATHER], [
        {"role": U, "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": None, "reasoning_content": "The user wants Paris weather; call the tool.",
         "tool_calls": [WEATHER_CALL]},
        WEATHER_RESULT,
    ]),
    "tool_reasoning_before_last_user": ([WEATHER], [
        {"role": U, "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": None, "reasoning_content": "Dropped: before the last user turn.",
         "tool_calls": [WEATHER_CALL]},
        WEATHER_RESULT,
        {"role": "assistant", "content": "15 °C."},
        {"role": U, "content": "Thanks."},
    ]),
    "tool_history_without_tools": (None, [
        {"role": U, "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [WEATHER_CALL]},
        WEATHER_RESULT,
        {"role": "assistant", "content": "15 °C."},
    ]),
    "tool_stray_result": ([WEATHER], [
        {"role": U, "content": "Hi"},
        {"role": "tool", "tool_call_id": "call_1", "content": "dropped: no call before it"},
        {"role": "assistant", "content": "Hello!"},
    ]),
}


def to_template_messages(messages):
    """The messages as the template reads them: tool call arguments as a mapping."""
    out = copy.deepcopy(messages)
    for m in out:
        for tc in m.get("tool_calls") or []:
            args = tc["function"].get("arguments")
            if isinstance(args, str):
                tc["function"]["arguments"] = json.loads(args) if args else {}
    return out
