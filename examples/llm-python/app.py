"""A fake OpenAI-style /v1/chat/completions behind floodgate's WSGI
middleware. Each request reserves what it could cost (its prompt and its
max_tokens) from its API key's token budget before the view runs, and is
settled at usage.total_tokens once the response has gone. A request whose
estimate does not fit in what is left gets 429.

    floodgate serve --config floodgate.yaml       # the `tokens` rule
    PYTHONPATH=../../clients/python/src python3 app.py   # 127.0.0.1:5000
"""

from __future__ import annotations

import io
import json
import math
import os
import time

from flask import Flask, jsonify, request

from floodgate_client import Client, FloodgateWSGI, Reserve, openai_usage

MAX_BODY = 1 << 20


def prompt_tokens(doc: dict) -> int:
    """About four characters a token, as OpenAI's rule of thumb."""
    messages = doc.get("messages") if isinstance(doc.get("messages"), list) else []
    chars = sum(len(str(m.get("content", ""))) for m in messages if isinstance(m, dict))
    return max(1, math.ceil(chars / 4))


def max_tokens(doc: dict) -> int:
    n = doc.get("max_tokens")
    return min(n, 4096) if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 256


def request_json(environ: dict) -> dict:
    """The request's JSON body, read before the application and put back
    for it (WSGI's input can be read once)."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    data = environ["wsgi.input"].read(min(length, MAX_BODY)) if length > 0 else b""
    environ["wsgi.input"] = io.BytesIO(data)
    try:
        doc = json.loads(data)
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def estimate(environ: dict) -> int:
    doc = request_json(environ)
    return prompt_tokens(doc) + max_tokens(doc)


def api_key(environ: dict) -> str:
    """The budget is the API key's; without one, the caller's address."""
    return environ.get("HTTP_AUTHORIZATION") or environ.get("REMOTE_ADDR", "")


app = Flask(__name__)


@app.post("/v1/chat/completions")
def completions():
    # The "model": echoes the last message's words back, at most max_tokens of them.
    doc = request.get_json(silent=True) or {}
    messages = doc.get("messages") if isinstance(doc.get("messages"), list) else []
    words = str(messages[-1].get("content", "")).split() if messages else []
    reply = list(reversed(words))[:max_tokens(doc)]
    prompt = prompt_tokens(doc)
    return jsonify({
        "id": f"chatcmpl-{time.time_ns():x}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": doc.get("model", "fake-1"),
        "choices": [{"index": 0, "message": {"role": "assistant", "content": " ".join(reply)},
                     "finish_reason": "length" if len(reply) < len(words) else "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": len(reply),
                  "total_tokens": prompt + len(reply)},
    })


app.wsgi_app = FloodgateWSGI(
    app.wsgi_app, rule="tokens", key=api_key,
    client=Client(os.environ.get("FLOODGATE_URL", "http://127.0.0.1:8080")),
    # usage.total_tokens of the JSON sent; the estimate if there is none.
    reserve=Reserve(estimate=estimate, settle=openai_usage, ttl_ms=120000))

if __name__ == "__main__":
    app.run("127.0.0.1", int(os.environ.get("PORT", "5000")))
