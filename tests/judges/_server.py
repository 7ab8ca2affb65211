"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for tests and the bench.

``POST /v1/chat/completions`` answers with the real response shape; ``responder(body, n)``
(``n`` = 1-based request number) returns the :class:`Reply` to send. Requests are counted and
kept (``server.requests``). A reply's ``raw`` body is sent as it is (an HTML page, truncated JSON,
JSON of another shape), with ``content_type``; its ``delay`` counts from the request's arrival
(the time this server spends reading and parsing the body is part of it, as a benchmark's
latency must be exact); ``{auth}`` in its text, content or error message
becomes the request's ``Authorization`` header (a server that echoes the key).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Reply:
    content: str | None = (
        "Editing Accuracy: [7]/10\nContextual Preservation: [8]/10\nVisual Quality: [6]/10"
    )
    status: int = 200
    delay: float = 0.0
    refusal: str | None = None
    finish_reason: str = "stop"
    prompt_tokens: int = 1000
    completion_tokens: int = 100
    headers: dict[str, str] = field(default_factory=dict)
    raw: str | None = None
    content_type: str = "application/json"
    message: str | None = None  # the error message of a non-200 reply


def chat_answer(body: dict, n: int, reply: Reply, auth: str) -> tuple:
    """``(status, body, headers, content type)`` of the answer to chat request ``n``
    (``body``, parsed) as ``reply`` scripts it; ``{auth}`` becomes ``auth``."""
    if reply.raw is not None:
        raw = reply.raw.replace("{auth}", auth).encode()
        return reply.status, raw, reply.headers, reply.content_type
    if reply.status != 200:
        message = (reply.message or f"scripted {reply.status}").replace("{auth}", auth)
        error = {"message": message, "type": "scripted", "code": None, "param": None}
        return reply.status, {"error": error}, reply.headers, "application/json"
    content = reply.content and reply.content.replace("{auth}", auth)
    message = {"role": "assistant", "content": content, "refusal": reply.refusal}
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": reply.finish_reason,
    }
    usage = {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }
    answer = {
        "id": f"chatcmpl-{n}",
        "object": "chat.completion",
        "created": 1700000000,
        "model": body["model"],
        "choices": [choice],
        "usage": usage,
    }
    return 200, answer, {}, "application/json"


class FakeJudgeServer:
    def __init__(self, responder=None, *, keep_bodies: bool = True) -> None:
        self.responder = responder or (lambda body, n: Reply())
        self.requests: list[dict] = []
        self.count = 0
        self.keep_bodies = keep_bodies
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go out in two writes

            def do_POST(self) -> None:  # noqa: N802
                arrived = time.perf_counter()  # a reply's delay counts from here
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with server._lock:
                    server.count += 1
                    n = server.count
                    if server.keep_bodies:
                        server.requests.append(
                            {"path": self.path, "auth": self.headers.get("Authorization"), **body}
                        )
                if self.path != "/v1/chat/completions":
                    return self._send(404, {"error": {"message": "no such route", "type": "x"}})
                reply = server.responder(body, n)
                if reply.delay:  # reading and parsing the body is part of it, not added
                    time.sleep(max(0.0, reply.delay - (time.perf_counter() - arrived)))
                auth = self.headers.get("Authorization") or ""
                self._send(*chat_answer(body, n, reply, auth))

            def do_GET(self) -> None:  # noqa: N802
                self._send(200, {"requests": server.count})

            def _send(self, status, obj, headers=None, ctype="application/json") -> None:
                data = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (headers or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client timed out and left

            def log_message(self, *args) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True
            request_queue_size = 256

            def handle_error(self, request, client_address) -> None:
                pass

        self._httpd = Server(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> FakeJudgeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


def first_text(body: dict) -> str:
    """All text parts of a request's messages, joined (to script replies per sample)."""
    out = []
    for m in body["messages"]:
        content = m["content"]
        if isinstance(content, str):
            out.append(content)
        else:
            out += [p["text"] for p in content if p["type"] == "text"]
    return "\n".join(out)


if __name__ == "__main__":  # a server in its own process (bench/judge.py): LATENCY [ANSWER]
    import sys

    latency = float(sys.argv[1])
    answer = sys.argv[2] if len(sys.argv) > 2 else Reply().content
    with FakeJudgeServer(lambda b, n: Reply(answer, delay=latency), keep_bodies=False) as srv:
        print(srv.base_url, flush=True)
        sys.stdin.read()  # until the parent closes our stdin
