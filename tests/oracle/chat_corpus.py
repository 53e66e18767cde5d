"""A deterministic corpus of chat-template contexts: system/user/assistant turns, reasoning
(reasoning_content, thinking, <think> in content), tool definitions and calls (arguments as a
dict and as a string), tool results, unicode, empty content, generation-prompt and thinking
flags, and conversations some templates must reject with raise_exception."""
import copy
import random

SYSTEMS = [
    "You are a helpful assistant.",
    "Tu es un assistant serviable. 你好！Отвечай кратко. 🤖",
    "",
    "  Leading and trailing whitespace.\n\nTwo paragraphs.  \n",
    "Use \"double\" and 'single' quotes, backslashes \\ and a tab\there.",
]

USERS = [
    "Hello!",
    "What is 2 + 2?",
    "Écris un haïku sur la mer. 🌊",
    "東京の天気は？",
    "",
    "   padded question   ",
    "Line one\nLine two\n\nLine four",
    "<tool_response>\nnot really a tool response\n</tool_response>",
    "Use {{ braces }} and {% tags %} literally.",
    "Ünïcödé: ß ﬁ İ Σίσυφος — “quotes” …",
]

ANSWERS = [
    "Hi! How can I help?",
    "2 + 2 = 4.",
    "La mer murmure\nsous la lune pâle —\nvagues d'argent. 🌙",
    "",
    "  Answer with surrounding spaces.  ",
    "Here is code:\n```python\nprint('hi')\n```",
]

THOUGHTS = [
    "The user greets me. I should greet back.",
    "2 + 2: add the numbers.\nResult is 4.",
    "Let me think step by step… 思考中。",
    "",
]

WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string", "description": "City name, e.g. Paris"},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
                "days": {"type": "integer", "description": "Forecast days", "default": 1},
            },
            "required": ["city"],
        },
    },
}

SEARCH_TOOL = {
    "type": "function",
    "function": {
        "name": "search_docs",
        "description": "Search the documentation — returns snippets.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string"},
                "limit": {"type": "number", "description": "Max results", "default": 2.5},
                "tags": {"type": "array", "items": {"type": "string"}},
                "exact": {"type": "boolean", "nullable": True},
                "filters": {
                    "type": "object",
                    "properties": {"lang": {"type": "string"}, "year": {"type": "integer"}},
                    "required": ["lang"],
                },
                "points": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "number"}}}},
                "mode": {"oneOf": [{"type": "string", "description": "named"}, {"type": "integer"}]},
                "any_of": {"type": ["string", "null"]},
            },
            "required": ["query", "tags"],
        },
    },
}

NO_ARGS_TOOL = {
    "type": "function",
    "function": {"name": "get_time", "description": "Current time (no arguments).", "parameters": {}},
}

TOOL_SETS = [[WEATHER_TOOL], [WEATHER_TOOL, SEARCH_TOOL], [SEARCH_TOOL, NO_ARGS_TOOL]]

CALL_ARGS = [
    {"city": "Paris"},
    {"city": "São Paulo", "unit": "celsius", "days": 3},
    {"query": "naïve \"quoted\" text", "tags": ["a", "b"], "limit": 10, "exact": True, "filters": None},
    {"query": "floats", "tags": [], "limit": 0.1, "ratio": 1e-7, "big": 12345678901234, "neg": -2.5},
    {},
]

TOOL_RESULTS = [
    '{"temperature": 21, "condition": "sunny"}',
    "22°C, partly cloudy ☁️",
    "",
    "Line 1\nLine 2",
]


def _tool_call(name, args, as_string, call_id):
    return {
        "id": f"call_{call_id}",
        "type": "function",
        "function": {"name": name, "arguments": _dumps(args) if as_string else copy.deepcopy(args)},
    }


def _dumps(args):
    import json
    return json.dumps(args, ensure_ascii=False)


def _fixed_cases():
    """Hand-written conversations covering each feature at least once."""
    u, a = "user", "assistant"
    cases = [
        {"messages": [{"role": u, "content": "Hello!"}], "add_generation_prompt": True},
        {"messages": [{"role": u, "content": "Hello!"}], "add_generation_prompt": False},
        {"messages": [{"role": "system", "content": SYSTEMS[0]}, {"role": u, "content": USERS[1]}],
         "add_generation_prompt": True},
        {"messages": [{"role": u, "content": USERS[1]}], "add_generation_prompt": True, "enable_thinking": False},
        {"messages": [{"role": u, "content": USERS[1]}], "add_generation_prompt": True, "enable_thinking": True},
        {"messages": [{"role": u, "content": USERS[0]}, {"role": a, "content": ANSWERS[0]},
                      {"role": u, "content": USERS[2]}], "add_generation_prompt": True},
        {"messages": [{"role": u, "content": USERS[1]},
                      {"role": a, "content": "<think>\n" + THOUGHTS[1] + "\n</think>\n\n" + ANSWERS[1]}],
         "add_generation_prompt": False},
        {"messages": [{"role": u, "content": USERS[1]},
                      {"role": a, "content": ANSWERS[1], "reasoning_content": THOUGHTS[1]},
                      {"role": u, "content": USERS[0]}], "add_generation_prompt": True},
        {"messages": [{"role": u, "content": USERS[1]},
                      {"role": a, "content": ANSWERS[1], "thinking": THOUGHTS[1]}],
         "add_generation_prompt": False},
        {"messages": [{"role": u, "content": ""}, {"role": a, "content": ""}], "add_generation_prompt": False},
        {"messages": [{"role": "system", "content": SYSTEMS[1]}, {"role": u, "content": USERS[3]}],
         "add_generation_prompt": True},
        # A tool round trip, arguments as a dict.
        {"messages": [{"role": u, "content": "Weather in Paris?"},
                      {"role": a, "content": None, "tool_calls": [_tool_call("get_weather", CALL_ARGS[0], False, 1)]},
                      {"role": "tool", "content": TOOL_RESULTS[0], "tool_call_id": "call_1"},
                      {"role": a, "content": "It is sunny and 21°C."}],
         "tools": [WEATHER_TOOL], "add_generation_prompt": False},
        # Arguments as a JSON string, two parallel calls and two results.
        {"messages": [{"role": "system", "content": SYSTEMS[0]}, {"role": u, "content": "Weather in Paris and Rome?"},
                      {"role": a, "content": None, "tool_calls": [
                          _tool_call("get_weather", CALL_ARGS[0], True, 2),
                          _tool_call("get_weather", {"city": "Rome"}, True, 3)]},
                      {"role": "tool", "content": TOOL_RESULTS[0], "tool_call_id": "call_2"},
                      {"role": "tool", "content": TOOL_RESULTS[1], "tool_call_id": "call_3"}],
         "tools": [WEATHER_TOOL], "add_generation_prompt": True},
        {"messages": [{"role": u, "content": "Search please"}],
         "tools": [WEATHER_TOOL, SEARCH_TOOL, NO_ARGS_TOOL], "add_generation_prompt": True},
        {"messages": [{"role": u, "content": "Think, then call."},
                      {"role": a, "content": "I will look it up.", "reasoning_content": THOUGHTS[0],
                       "tool_calls": [_tool_call("search_docs", CALL_ARGS[2], False, 4)]},
                      {"role": "tool", "content": TOOL_RESULTS[3]}],
         "tools": [SEARCH_TOOL], "add_generation_prompt": True},
        {"messages": [{"role": "system", "content": SYSTEMS[3]}, {"role": u, "content": USERS[6]}],
         "add_generation_prompt": True, "reasoning_effort": "high", "model_identity": "You are Test Model."},
        {"messages": [{"role": u, "content": USERS[9]}], "add_generation_prompt": True,
         "builtin_tools": ["browser", "python"]},
        {"messages": [{"role": "developer", "content": "Be terse."}, {"role": u, "content": USERS[8]}],
         "add_generation_prompt": True},
        # Conversations some templates refuse with raise_exception.
        {"messages": [{"role": u, "content": "a"}, {"role": u, "content": "b"}], "add_generation_prompt": True},
        {"messages": [{"role": "tool", "content": "orphan result"}], "add_generation_prompt": True},
        {"messages": [{"role": u, "content": "x"},
                      {"role": a, "content": "<|channel|>analysis<|message|>leak"}], "add_generation_prompt": False},
        {"messages": [{"role": a, "content": "I speak first."}], "add_generation_prompt": True},
        {"messages": [], "add_generation_prompt": True},
    ]
    return cases


def _random_case(rng, index):
    messages = []
    if rng.random() < 0.5:
        messages.append({"role": rng.choice(["system", "system", "developer"]), "content": rng.choice(SYSTEMS)})
    turns = rng.randint(1, 4)
    tools = rng.choice(TOOL_SETS) if rng.random() < 0.45 else None
    call_id = 0
    for t in range(turns):
        messages.append({"role": "user", "content": rng.choice(USERS)})
        last = t == turns - 1
        if last and rng.random() < 0.5:
            break
        if tools and rng.random() < 0.6:
            calls = []
            for _ in range(rng.choice([1, 1, 2])):
                call_id += 1
                fn = rng.choice(tools)["function"]["name"]
                calls.append(_tool_call(fn, rng.choice(CALL_ARGS), rng.random() < 0.4, call_id))
            msg = {"role": "assistant", "tool_calls": calls,
                   "content": rng.choice([None, "", "", "", "Let me check.", "Let me check."])}
            if rng.random() < 0.3:
                msg["reasoning_content"] = rng.choice(THOUGHTS)
            if rng.random() < 0.2:
                msg["thinking"] = rng.choice(THOUGHTS)
            messages.append(msg)
            for c in calls:
                messages.append({"role": "tool", "content": rng.choice(TOOL_RESULTS), "tool_call_id": c["id"]})
            if rng.random() < 0.6:
                messages.append({"role": "assistant", "content": rng.choice(ANSWERS)})
            else:
                break
        else:
            style = rng.random()
            answer = rng.choice(ANSWERS)
            if style < 0.25:
                msg = {"role": "assistant", "content": f"<think>\n{rng.choice(THOUGHTS)}\n</think>\n\n{answer}"}
            elif style < 0.45:
                msg = {"role": "assistant", "content": answer, "reasoning_content": rng.choice(THOUGHTS)}
            elif style < 0.55:
                msg = {"role": "assistant", "content": answer, "reasoning_content": None}
            elif style < 0.65:
                msg = {"role": "assistant", "content": answer, "thinking": rng.choice(THOUGHTS)}
            else:
                msg = {"role": "assistant", "content": answer}
            messages.append(msg)
    ctx = {"messages": messages, "add_generation_prompt": rng.random() < 0.6}
    if tools:
        ctx["tools"] = copy.deepcopy(tools)
    elif rng.random() < 0.5:
        ctx["tools"] = None  # transformers passes tools=None when there are none
    r = rng.random()
    if r < 0.3:
        ctx["enable_thinking"] = False
    elif r < 0.5:
        ctx["enable_thinking"] = True
    if rng.random() < 0.2:
        ctx["reasoning_effort"] = rng.choice(["low", "medium", "high"])
    return ctx


def qwen35_cases():
    """What only the Qwen3.5 template reads: content as a list of image/video/text parts (with and
    without add_vision_id), the errors its render_content and role checks raise, tool calls in
    every argument shape its XML format distinguishes, multi-step tool turns (whose tool-response-
    only user turns do not move the last query), and enable_thinking values that are not booleans."""
    u, a = "user", "assistant"
    img = {"type": "image", "image": "file:///cat.png"}
    parts = [{"type": "text", "text": "  Compare "}, img, {"type": "image_url", "image_url": {"url": "x"}},
             {"type": "text", "text": "and"}, {"type": "video", "video": "clip.mp4"}, {"text": " done. "}]
    args = {"nested": {"a": [1, 2.5, None], "b": "é"}, "list": ["x", {"y": True}], "none": None,
            "flag": False, "float": 1e-7, "int": -3, "text": "multi\nline"}
    call = lambda name, arguments: {"type": "function", "function": {"name": name, "arguments": arguments}}
    search = [{"role": u, "content": "Search twice."},
              {"role": a, "content": "", "reasoning_content": "\nFirst search.\n",
               "tool_calls": [call("search_docs", {"query": "a", "tags": []})]},
              {"role": "tool", "content": TOOL_RESULTS[0]},
              {"role": a, "content": "<think>Second.</think>\n\nNow the other.",
               "tool_calls": [call("search_docs", {"query": "b", "tags": ["t"]}), call("get_time", {})]},
              {"role": "tool", "content": TOOL_RESULTS[1]},
              {"role": "tool", "content": TOOL_RESULTS[2]}]
    cases = [
        {"messages": [{"role": u, "content": parts}], "add_generation_prompt": True},
        {"messages": [{"role": u, "content": parts}, {"role": a, "content": [{"type": "text", "text": "ok"}]},
                      {"role": u, "content": [img, img]}], "add_generation_prompt": True, "add_vision_id": True},
        {"messages": [{"role": "system", "content": [{"type": "text", "text": "Sys parts."}]},
                      {"role": u, "content": "hi"}], "tools": [WEATHER_TOOL], "add_generation_prompt": True},
        {"messages": [{"role": "system", "content": [img]}, {"role": u, "content": "hi"}], "add_generation_prompt": True},
        {"messages": [{"role": "system", "content": [{"type": "video"}]}, {"role": u, "content": "hi"}]},
        {"messages": [{"role": u, "content": [{"type": "audio", "audio": "a.wav"}]}]},
        {"messages": [{"role": u, "content": {"text": "a mapping"}}]},
        {"messages": [{"role": u, "content": 42}]},
        {"messages": [{"role": u, "content": None}, {"role": a}], "add_generation_prompt": False},
        {"messages": [{"role": u, "content": "hi"}, {"role": "system", "content": "late"}]},
        {"messages": [{"role": "critic", "content": "?"}, {"role": u, "content": "hi"}]},
        {"messages": search, "tools": [SEARCH_TOOL, NO_ARGS_TOOL], "add_generation_prompt": True},
        {"messages": search + [{"role": a, "content": "Both done."}], "tools": [SEARCH_TOOL],
         "add_generation_prompt": True, "enable_thinking": False},
        {"messages": [{"role": u, "content": "q1"}, {"role": a, "content": "a1", "reasoning_content": "r1"},
                      {"role": u, "content": "<tool_response>\nlate result\n</tool_response>"},
                      {"role": a, "content": "<think>\nr2\n</think>\n\na2", "reasoning_content": "kept"}],
         "add_generation_prompt": False},
        {"messages": [{"role": u, "content": "q"}, {"role": a, "content": "<think>never closed\nanswer"},
                      {"role": a, "content": "x</think>y</think>z"}]},
        {"messages": [{"role": u, "content": "call"},
                      {"role": a, "content": "Calling.", "tool_calls": [call("f", args),
                                                                         {"name": "bare", "arguments": {"k": 1}},
                                                                         {"function": {"name": "noargs"}}]}],
         "tools": {"not": "a list"}, "add_generation_prompt": True},
        {"messages": [{"role": u, "content": "call"},
                      {"role": a, "content": None, "tool_calls": {"name": "mapping"}}]},
        {"messages": [{"role": "tool", "content": "first"}, {"role": u, "content": "q"},
                      {"role": "tool", "content": "after user"}], "add_generation_prompt": True},
        {"messages": [{"role": u, "content": "q"}], "add_generation_prompt": True, "enable_thinking": 0},
        {"messages": [{"role": u, "content": "q"}], "add_generation_prompt": True, "enable_thinking": "false"},
        {"messages": [{"role": u, "content": "q"}], "add_generation_prompt": True, "enable_thinking": None},
    ]
    return cases


def corpus(seed, count, special_tokens, extra=()):
    """The fixed cases (then `extra`) followed by random ones, `count` in all, with the special
    tokens merged in the way transformers merges special_tokens_map into the template kwargs."""
    rng = random.Random(seed)
    cases = _fixed_cases() + list(extra)
    index = 0
    while len(cases) < count:
        cases.append(_random_case(rng, index))
        index += 1
    out = []
    for c in cases[:count]:
        ctx = dict(special_tokens)
        ctx.update(copy.deepcopy(c))
        out.append(ctx)
    return out
