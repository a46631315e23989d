#!/usr/bin/env python3
"""Renders reference prompts with the official Gemma chat templates (Jinja, as HF transformers does).

Writes tests/data/chat_goldens.json: for every case, the template file, the messages (and, for tool
cases, the OpenAI `tools`), the options and the exact prompt text the template yields, or the error it
raised. gemlet's chat formatter is tested against it. Tool cases (tool_conversations.py) are rendered
with the Gemma 4 templates only: Gemma 1-3 have no tool format.
Needs python3 with jinja2 (Debian: python3-jinja2). Run from the repository root:
    python3 tools/chat_goldens/render_goldens.py ../shared/testdata tests/data/chat_goldens.json
"""
import json
import lzma
import sys

import jinja2
import jinja2.ext
import tool_conversations
from jinja2.sandbox import ImmutableSandboxedEnvironment


def make_env():
    # The same environment settings transformers' apply_chat_template uses.
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[jinja2.ext.loopcontrols])

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    env.globals["raise_exception"] = raise_exception
    return env


def main():
    testdata, out_path = sys.argv[1], sys.argv[2]
    templates = {
        "gemma2": open(f"{testdata}/templates/google-gemma-2-2b-it.jinja").read(),
        "gemma3": json.loads(lzma.open(f"{testdata}/tokenizer/gemma3_tokenizer_config.json.xz").read())["chat_template"],
        "gemma4": open(f"{testdata}/templates/google-gemma-4-31B-it.jinja").read(),
        "gemma4_interleaved": open(f"{testdata}/templates/google-gemma-4-31B-it-interleaved.jinja").read(),
    }
    U, A, S = "user", "assistant", "system"
    conversations = {
        "single": [{"role": U, "content": "Hello!"}],
        "chinese": [{"role": U, "content": "请把这句话改得更正式一些：我们明天见。"}],
        "trim": [{"role": U, "content": "  padded question \n\n"}],
        "multi_turn": [
            {"role": U, "content": "What is 2+2?"},
            {"role": A, "content": "4"},
            {"role": U, "content": "And times 3?"},
        ],
        "system": [
            {"role": S, "content": "You are a concise assistant."},
            {"role": U, "content": "Summarise: the cat sat on the mat."},
        ],
        "system_multi_turn_mixed": [
            {"role": S, "content": "Answer in Chinese when asked in Chinese.\n"},
            {"role": U, "content": "写一个 SQL 查询：统计每个城市的用户数。"},
            {"role": A, "content": "SELECT city, COUNT(*) FROM users GROUP BY city;"},
            {"role": U, "content": "Now in English, explain it."},
        ],
        "assistant_with_thinking": [
            {"role": U, "content": "Is 91 prime?"},
            {"role": A, "content": "<|channel>thought\n91 = 7 * 13.<channel|>No, 91 = 7 × 13."},
            {"role": U, "content": "And 97?"},
        ],
        "multiline": [{"role": U, "content": "line one\nline two\n\n  indented"}],
        "consecutive_assistant": [
            {"role": U, "content": "Tell me a joke."},
            {"role": A, "content": "Why did the chicken cross the road?"},
            {"role": A, "content": "To get to the other side."},
            {"role": U, "content": "Another one?"},
        ],
    }
    cases = []
    env = make_env()
    for tname, source in templates.items():
        template = env.from_string(source)
        for cname, messages in conversations.items():
            for gen in (True, False):
                for thinking in ((False, True) if tname.startswith("gemma4") else (False,)):
                    if cname == "assistant_with_thinking" and not tname.startswith("gemma4"):
                        continue
                    kwargs = dict(messages=messages, add_generation_prompt=gen, bos_token="<bos>",
                                  eos_token="<eos>")
                    if thinking:
                        kwargs["enable_thinking"] = True
                    try:
                        text = template.render(**kwargs)
                        error = None
                    except jinja2.exceptions.TemplateError as e:
                        text, error = None, str(e)
                    cases.append({"template": tname, "conversation": cname, "messages": messages,
                                  "add_generation_prompt": gen, "enable_thinking": thinking,
                                  "expected": text, "error": error})
    for tname, source in templates.items():
        if not tname.startswith("gemma4"):
            continue
        template = env.from_string(source)
        for cname, (tools, messages) in tool_conversations.TOOL_CONVERSATIONS.items():
            for gen in (True, False):
                for thinking in (False, True):
                    kwargs = dict(messages=tool_conversations.to_template_messages(messages),
                                  add_generation_prompt=gen, bos_token="<bos>", eos_token="<eos>")
                    if tools is not None:
                        kwargs["tools"] = tools
                    if thinking:
                        kwargs["enable_thinking"] = True
                    try:
                        text = template.render(**kwargs)
                        error = None
                    except (jinja2.exceptions.TemplateError, TypeError) as e:  # TypeError: str + None
                        text, error = None, f"{type(e).__name__}: {e}"
                    cases.append({"template": tname, "conversation": cname, "tools": tools, "messages": messages,
                                  "add_generation_prompt": gen, "enable_thinking": thinking,
                                  "expected": text, "error": error})
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump({"generated_by": "tools/chat_goldens/render_goldens.py", "jinja2": jinja2.__version__,
                   "cases": cases}, f, ensure_ascii=False, indent=1)
    print(f"{len(cases)} cases -> {out_path}")


if __name__ == "__main__":
    main()
