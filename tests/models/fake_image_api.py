"""A local HTTP server that speaks the image-editing APIs medibench's adapters call.

- ``POST /v1/images/edits`` (OpenAI, multipart; ``image``, or several ``image[]`` whose last is
  edited) -> ``{"data": [{"b64_json": ...}]}``;
- ``POST /v1beta/models/{model}:generateContent`` (Gemini, JSON with ``inline_data``; the last
  turn is edited) -> ``candidates[0].content.parts[].inlineData``;
- ``POST /edit`` (a plain JSON endpoint for the ``http`` adapter) -> ``{"image": ...}``;
- ``POST /v1/chat/completions`` (OpenAI chat, when a ``chat`` responder is given: the reply that
  ``chat(body, n)`` scripts, as :class:`tests.judges._server.FakeJudgeServer` sends it), so one
  server stands for every API a command calls.

The edit is ``255 - input``. The prompt steers a sample's answer: ``REFUSE`` (content filter),
``NOIMAGE`` (a well-formed answer without an image), ``GRAY`` (a gray image twice the size),
``ECHOKEY400`` / ``ECHOKEY200`` (OpenAI edits: a 400 error, or a 200 answer without an image,
that echoes the request's ``Authorization`` header, as some proxies do).
:attr:`FakeImageAPI.script` steers the next requests in arrival order: an HTTP status (``429``,
``503``), ``"slow"`` (answer after ``slow_s``, for client timeouts) or ``"garbage"`` (not JSON).
Every request is recorded; ``latency`` delays every answer (for throughput benchmarks), counted
from the request's arrival: reading its body is part of it, not added to it.
"""

from __future__ import annotations

import base64
import email.parser
import email.policy
import io
import json
import socket
import threading
import time
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
from PIL import Image


class FakeImageAPI:
    """Start with ``with FakeImageAPI() as api:``; ``api.url`` is ``http://127.0.0.1:PORT``."""

    def __init__(
        self, latency: float = 0.0, slow_s: float = 1.0, echo: bool = False, chat=None
    ) -> None:
        self.latency = latency
        self.chat = chat  # (request body, request number) -> tests.judges._server.Reply
        self.slow_s = slow_s
        # echo: answer OpenAI edits with the uploaded image itself, without decoding or
        # re-encoding it, so that a throughput benchmark measures the client, not this server's
        # CPU (a real API does its work on other machines).
        self.echo = echo
        self.script: deque = deque()
        self.requests: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        handler = type("Handler", (_Handler,), {"api": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._server.request_queue_size = 128
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeImageAPI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _next_action(self):
        with self._lock:
            return self.script.popleft() if self.script else None


class _Handler(BaseHTTPRequestHandler):
    api: FakeImageAPI
    protocol_version = "HTTP/1.1"

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in two writes: without this, Nagle's algorithm and delayed
        # ACKs add ~40 ms to every answer.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, *args) -> None:  # keep test output clean
        pass

    def do_POST(self) -> None:
        api = self.api
        with api._lock:
            api.in_flight += 1
            api.max_in_flight = max(api.max_in_flight, api.in_flight)
        try:
            self._answer(api)
        finally:
            with api._lock:
                api.in_flight -= 1

    def _answer(self, api: FakeImageAPI) -> None:
        arrived = time.perf_counter()
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        action = api._next_action()
        record = {"path": self.path, "headers": dict(self.headers), "action": action}
        api.requests.append(record)
        if action == "slow":
            time.sleep(api.slow_s)
            arrived = time.perf_counter()  # the latency comes on top of a slow answer
        if api.latency:  # counted from the request's arrival: reading its body is part of it
            time.sleep(max(0.0, api.latency - (time.perf_counter() - arrived)))
        if isinstance(action, int):
            extra = {"Retry-After": "0"} if action == 429 else {}
            return self._send(action, {"error": {"message": f"status {action}"}}, extra)
        if action == "garbage":
            return self._send(200, b"<html>upstream proxy error</html>", ctype="text/html")
        if self.path.endswith("/chat/completions") and api.chat is not None:
            return self._chat(body, record)
        if self.path.endswith("/images/edits"):
            return self._openai(body, record)
        if self.path.endswith(":generateContent"):
            return self._gemini(body, record)
        return self._plain(body, record)

    def _openai(self, body: bytes, record: dict) -> None:
        if self.api.echo:
            return self._send(200, {"created": 1, "data": [{"b64_json": _echo(body)}]})
        fields, files, uploads = _multipart(self.headers["content-type"], body)
        record.update(fields=fields, files={k: (n, t) for k, (n, t, _) in files.items()})
        record["uploads"] = uploads  # every file, in order: (field, filename, type, bytes)
        prompt = fields.get("prompt", "")
        auth = self.headers.get("Authorization", "")
        if "ECHOKEY400" in prompt:
            return self._send(400, {"error": {"message": f"Incorrect API key provided: {auth}"}})
        if "ECHOKEY200" in prompt:
            return self._send(200, {"created": 1, "data": [], "debug": {"authorization": auth}})
        if "REFUSE" in prompt:
            error = {
                "code": "moderation_blocked",
                "message": "Your request was rejected by the safety system.",
                "type": "image_generation_user_error",
                "param": None,
            }
            return self._send(400, {"error": error})
        if "NOIMAGE" in prompt:
            return self._send(200, {"created": 1, "data": []})
        query = files["image"][2] if "image" in files else uploads[-1][3]  # image[]: the last
        out = _edited(query, prompt)
        return self._send(200, {"created": 1, "data": [{"b64_json": out}], "usage": {}})

    def _chat(self, body: bytes, record: dict) -> None:
        from tests.judges._server import chat_answer

        payload = json.loads(body)
        record["json"] = payload
        with self.api._lock:
            n = sum(1 for r in self.api.requests if r["path"] == self.path)
        reply = self.api.chat(payload, n)
        self._send(*chat_answer(payload, n, reply, self.headers.get("Authorization", "")))

    def _gemini(self, body: bytes, record: dict) -> None:
        payload = json.loads(body)
        record["json"] = payload
        parts = payload["contents"][-1]["parts"]  # the query: the last turn
        prompt = next(p["text"] for p in parts if "text" in p)
        image = next(p["inline_data"] for p in parts if "inline_data" in p)
        if "REFUSE" in prompt:
            return self._send(200, {"promptFeedback": {"blockReason": "SAFETY"}})
        if "NOIMAGE" in prompt:
            answer = [{"text": "I cannot edit medical images."}]
            cand = {"content": {"role": "model", "parts": answer}, "finishReason": "STOP"}
            return self._send(200, {"candidates": [cand]})
        out = _edited(base64.b64decode(image["data"]), prompt)
        parts = [
            {"text": "Here is the edit."},
            {"inlineData": {"mimeType": "image/png", "data": out}},
        ]
        cand = {"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}
        return self._send(200, {"candidates": [cand], "usageMetadata": {}})

    def _plain(self, body: bytes, record: dict) -> None:
        payload = json.loads(body)
        record["json"] = payload
        prompt = payload.get("prompt", "")
        if "REFUSE" in prompt:
            return self._send(200, {"refused": "policy", "image": None})
        if "NOIMAGE" in prompt:
            return self._send(200, {"result": "nothing to show"})
        out = _edited(base64.b64decode(payload["image"]), prompt)
        if "RAW" in prompt:
            return self._send(200, base64.b64decode(out), ctype="image/png")
        return self._send(200, {"image": out})

    def _send(self, status: int, body, headers=None, ctype="application/json") -> None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (a timeout test)
            pass


def _multipart(content_type: str, body: bytes):
    msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(
        f"Content-Type: {content_type}\r\n\r\n".encode() + body
    )
    fields, files, uploads = {}, {}, []
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        filename = part.get_param("filename", header="content-disposition")
        payload = part.get_payload(decode=True)
        if filename:
            files[name] = (filename, part.get_content_type(), payload)
            uploads.append((name, filename, part.get_content_type(), payload))
        else:
            fields[name] = payload.decode()
    return fields, files, uploads


def _echo(body: bytes) -> str:
    """The uploaded PNG of a multipart body, base64-encoded (from its signature to IEND)."""
    start = body.index(b"\x89PNG\r\n\x1a\n")
    end = body.index(b"IEND", start) + 8  # the chunk type and its CRC
    return base64.b64encode(body[start:end]).decode()


def _edited(image_bytes: bytes, prompt: str) -> str:
    image = np.asarray(Image.open(io.BytesIO(image_bytes)).convert("RGB"))
    out = 255 - image
    if "GRAY" in prompt:
        out = np.repeat(np.repeat(out[:, :, 0], 2, axis=0), 2, axis=1)
    buf = io.BytesIO()
    Image.fromarray(out).save(buf, format="PNG")
    return base64.b64encode(buf.getvalue()).decode()


if __name__ == "__main__":  # a server in its own process (bench/runner.py): prints its URL
    import sys

    latency = float(sys.argv[1]) if len(sys.argv) > 1 else 0.0
    echo = len(sys.argv) > 2 and sys.argv[2] == "echo"
    with FakeImageAPI(latency=latency, echo=echo) as server:
        print(server.url, flush=True)
        sys.stdin.read()  # serve until the parent closes our stdin
