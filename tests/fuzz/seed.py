#!/usr/bin/env python3
"""Write the seed inputs of every fuzz target into tests/fuzz/corpus/<target>/.

Seeds are spec examples, the provider fixtures (plugins/provider-*/fixtures),
the example config and edge cases. Run once before the first fuzzing session;
`cargo fuzz cmin` later keeps only the inputs that add coverage.
Usage: python3 tests/fuzz/seed.py
"""

import hashlib
import json
import pathlib

FUZZ = pathlib.Path(__file__).resolve().parent
ROOT = FUZZ.parent.parent


def put(target, data):
    if isinstance(data, str):
        data = data.encode()
    d = FUZZ / "corpus" / target
    d.mkdir(parents=True, exist_ok=True)
    (d / ("seed-" + hashlib.sha1(data).hexdigest()[:16])).write_bytes(data)


def chat():
    base = {"index": "Zero-Knowledge", "model": "echo/default"}
    bodies = [
        {**base, "prompt": "Hello"},
        {**base, "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]},
        {"index": "docs", "models": ["openai/gpt-4o", {"model": "anthropic/claude", "timeout_ms": 100, "first_token_timeout_ms": 50}],
         "redundancy": {"timeout_ms": 2000, "first_token_timeout_ms": 500, "on": ["timeout", "server_error", "rate_limit", "client_error"]},
         "prompt": "x", "stream": True, "temperature": 1.5, "max_tokens": 4000, "use_rag": True, "smltp_policy": "internal",
         "prompt_shield": {"enabled": True, "policy": "strict"}, "conversation_id": "c-1", "user_id": "usr_1", "stop": ["END", "STOP"]},
        {**base, "prompt": "a", "fallback_models": ["b/1", "c/2"], "system_message": "s", "tools": [{"type": "function"}],
         "response_format": {"type": "json_object"}, "seed": 7, "top_p": 0.5},
        {**base, "prompt": "a", "models": ["a/1"], "fallback_models": ["a/2"]},
        {**base, "prompt": "a", "models": ["a/1", "a/2", "a/3", "a/4"]},
        {**base, "prompt": "a", "models": ["a/1", "a/1", "a/1", "a/1", "a/1", "a/1", "a/1"]},
        {**base, "messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "late"}]},
        {**base, "messages": [{"role": "developer", "content": "dev"}, {"role": "user", "content": [{"type": "text", "text": "hi"}]}],
         "max_completion_tokens": 10, "n": 1, "stream_options": {"include_usage": True}, "store": False},
        {**base, "prompt": "a", "max_tokens": 0, "temperature": -1},
        {**base, "prompt": "a", "redundancy": {"on": ["meteor"]}},
        {"model": "echo/default", "prompt": "no index"},
        {**base, "prompt": "   "},
    ]
    for b in bodies:
        put("chat_request", json.dumps(b))
    for raw in [b"{nope", b"[1,2]", b"\xff\xfe", b"null", b"{}", b'{"index":"Zero-Knowledge","model":"a/b","prompt":"\\ud800"}']:
        put("chat_request", raw)


def sse():
    for fx in sorted((ROOT / "plugins").glob("provider-*/fixtures/stream*.txt")):
        put("sse_decoder", b"\x03" + fx.read_bytes())
    cases = [
        b"\x00data: hello\n\n",
        b"\x05\xef\xbb\xbfevent: message_start\r\ndata: {\"a\":1}\r\ndata: two\r\n\r\n: comment\rid: 7\rretry: 1500\r\rdata: [DONE]",
        b"\x01id: a\x00b\ndata\ndata:\n\n",
        b"\x02retry: 99999999999999999999999\nevent:x\n\nfield without colon\ndata:  two spaces\n\n",
        b"\x04data: " + b"x" * 80 + b"\n\n",
    ]
    for c in cases:
        put("sse_decoder", c)


def adapters():
    # byte 0: bit 0 = Anthropic, bit 1 = stream; responses: 2 status bytes.
    for name, bit in [("provider-openai", 0), ("provider-anthropic", 1)]:
        for fx in sorted((ROOT / "plugins" / name / "fixtures").iterdir()):
            data = fx.read_bytes()
            if fx.suffix == ".txt":
                put("provider_adapters", bytes([bit | 2]) + data)
            else:
                status = 200 if "error" not in fx.name else (401 if "401" in fx.name or "auth" in fx.name else 429 if "429" in fx.name else 529)
                put("provider_adapters", bytes([bit]) + status.to_bytes(2, "big") + data)
    put("provider_adapters", b"\x00\x00\xc8" + b'{"error":{"message":"bad key sk-fuzz-0123456789abcdefKEY","type":"invalid_request_error"}}')
    put("provider_adapters", b"\x03data: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":99999999999}}\n\n")


def webhook():
    urls = [
        "https://example.com/hook", "https://EXAMPLE.com./hook?x=1", "http://8.8.8.8:8080/x", "http://134744072/",
        "https://[2606:4700::1111]/", "http://[::ffff:8.8.8.8]/", "http://127.0.0.1/", "http://0x7f.1/", "http://0177.0.0.1/",
        "http://2130706433/", "http://127.0.0.1./", "http://%31%32%37.0.0.1/", "http://\uff11\uff12\uff17.0.0.1/",
        "http://127\u30020\u30020\u30021/", "http://[::1]/", "http://[::ffff:7f00:1]/", "http://[64:ff9b::7f00:1]/",
        "http://[2002:7f00:1::1]/", "http://[fe80::1%25eth0]/", "http://evil@127.0.0.1/", "http://127.0.0.1\\@example.com/",
        "http://localhost./", "http://api.localhost/", "http://\u24dbocalhost/", "ftp://example.com/", "javascript:alert(1)",
        "http://[::1/", "http://xn--nxasmq6b.com/", "https://example.com:65535/a/../b?c#d", "http://0/",
    ]
    for u in urls:
        put("webhook_url", u)


def config():
    put("config", (ROOT / "examples" / "gatehouse.toml").read_bytes())
    for t in [
        "",
        'listen = "127.0.0.1:9999"\n[limits.chat]\nper_minute = 5\nper_hour = 6\nper_day = 7\nper_month = 8\n',
        '[providers.x]\nplugin = ""\nbase_url = "http://x"\n',
        '[providers."a/b"]\nplugin = "p"\nbase_url = "http://x"\nconfig = 5\n',
        '[indexes.Zero-Knowledge]\nretriever = "r"\n',
        '[indexes.docs]\nretriever = "retriever-local"\ntop_k = 0\ntimeout_ms = 0\n[indexes.docs.config]\nk = [1, 2.5, "s", true]\n',
        "[server]\nmax_body_bytes = 1\n[webhooks]\nretry_delays_secs = []\ntimeout_ms = 18446744073709551615\n",
        "[webhooks]\nallow_private = true\nretry_delays_secs = [0, 10, 60]\ndisable_after = 20\n",
        'lisen = "x"\n',
        "[limits.chat]\nper_minute = \"lots\"\n",
        'data_dir = "/tmp/x"\ndurable_writes = false\n[log]\nformat = "json"\n[policies]\ndefault = "public"\n',
    ]:
        put("config", t)


def audit():
    for q in [
        "", "page=1&limit=50", "page=0", "limit=101", "page=1000000&limit=100",
        "startDate=2026-11-01&endDate=2026-11-23", "startDate=2026-11-23T10:00:00Z&endDate=2026-11-23T10:00:00%2B02:00",
        "startDate=2026-11-24&endDate=2026-11-23", "endDate=0000-01-01", "endDate=9999-12-31", "startDate=2026-13-01",
        "type=security_event&severity=critical&userId=usr_1&search=login", "severity=loud", "type=nope",
        "search=" + "a" * 201, "colour=red", "page=%201%20", "startDate=2026-11-23T10:00:00.123456789",
    ]:
        put("audit_query", q)


if __name__ == "__main__":
    chat()
    sse()
    adapters()
    webhook()
    config()
    audit()
    for d in sorted((FUZZ / "corpus").iterdir()):
        print(d.name, len(list(d.iterdir())))
