"""Drive a running Gatehouse with the official OpenAI Python SDK.

Run by tests/tests/openai_sdk.rs with GATEHOUSE_BASE_URL, GATEHOUSE_KEY and
GATEHOUSE_LIMITED_KEY (a key whose per-minute limit is 1) in the environment.
Every check raises on failure; the last line is `N passed, 0 failed`.
"""

import os
import sys

import openai

BASE = os.environ["GATEHOUSE_BASE_URL"] + "/api/external/v1"
KEY = os.environ["GATEHOUSE_KEY"]
LIMITED = os.environ["GATEHOUSE_LIMITED_KEY"]

client = openai.OpenAI(base_url=BASE, api_key=KEY, max_retries=0)
passed = []


def check(name):
    def wrap(f):
        f()
        passed.append(name)
        return f

    return wrap


@check("completion")
def _():
    r = client.chat.completions.create(model="echo/default", messages=[{"role": "user", "content": "hello sdk"}])
    assert r.object == "chat.completion", r
    assert r.choices[0].message.content == "Echo: hello sdk", r
    assert r.usage.total_tokens > 0, r.usage


@check("streamed completion with usage")
def _():
    stream = client.chat.completions.create(
        model="echo/default",
        messages=[{"role": "user", "content": "stream me please"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    text, usage = "", None
    for chunk in stream:
        if chunk.choices:
            text += chunk.choices[0].delta.content or ""
        if chunk.usage:
            usage = chunk.usage
    assert text == "Echo: stream me please", text
    assert usage is not None and usage.completion_tokens > 0, usage


@check("failover through extra_body")
def _():
    r = client.chat.completions.create(
        model="echo/default",
        messages=[{"role": "user", "content": "fail over"}],
        extra_body={"models": ["broken/x", "echo/default"]},
    )
    assert r.choices[0].message.content == "Echo: fail over", r
    meta = r.model_extra["gatehouse"]
    assert meta["failover"]["occurred"] is True, meta
    assert meta["served_model"] == "echo/default", meta


@check("401 as AuthenticationError")
def _():
    bad = openai.OpenAI(base_url=BASE, api_key="sk-not-a-real-key-000000000000000000000", max_retries=0)
    try:
        bad.chat.completions.create(model="echo/default", messages=[{"role": "user", "content": "x"}])
    except openai.AuthenticationError as e:
        assert e.status_code == 401
    else:
        raise AssertionError("no AuthenticationError")


@check("429 as RateLimitError")
def _():
    limited = openai.OpenAI(base_url=BASE, api_key=LIMITED, max_retries=0)
    limited.chat.completions.create(model="echo/default", messages=[{"role": "user", "content": "one"}])
    try:
        limited.chat.completions.create(model="echo/default", messages=[{"role": "user", "content": "two"}])
    except openai.RateLimitError as e:
        assert e.status_code == 429
    else:
        raise AssertionError("no RateLimitError")


@check("models list")
def _():
    ids = [m.id for m in client.models.list()]
    assert "echo/default" in ids, ids


print(f"{len(passed)} passed, 0 failed")
sys.exit(0)
