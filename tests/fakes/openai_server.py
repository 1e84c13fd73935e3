"""A fake OpenAI-compatible chat server on 127.0.0.1, scriptable request by request.

Real HTTP (a threaded :mod:`http.server` on port 0), so the real :class:`amem.llm.LLMClient`
with its real :class:`httpx.Client` is what gets tested. Each request to
``POST /v1/chat/completions`` takes the next item of the script (or ``default`` when the script
is empty). An item is a :class:`Reply` or a callable ``(Request) -> Reply`` for behaviour that
depends on what was asked. The helpers build the usual cases: :func:`chat`, :func:`json_reply`,
:func:`garbage`, :func:`error`, :func:`slow`, :func:`raw`, :func:`reject_format`, and the hostile
ones: :func:`envelope` (any JSON as the whole body), :func:`raw_bytes` (truncated or invalid
bytes), :func:`drip` (a byte at a time, headers included if asked), :func:`huge` (a body of any
size generated as it is sent, with or without a ``Content-Length``).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Callable, Iterator, Union

CHAT_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class Reply:
    """One HTTP answer: status, body (a dict is sent as JSON, bytes as they are), headers, and a
    delay before it. ``drip`` sends the body one byte per ``drip`` seconds (the status line and
    headers too when ``drip_headers``); ``generate`` replaces the body by a stream of chunks made
    while sending (for replies too large to build), with no ``Content-Length`` unless
    ``declare_length`` gives one."""

    status: int = 200
    body: Union[dict[str, Any], str, bytes] = ""
    headers: tuple[tuple[str, str], ...] = ()
    delay: float = 0.0
    drip: float = 0.0
    drip_headers: bool = False
    generate: Callable[[], Iterator[bytes]] | None = None
    declare_length: int | None = None


@dataclass(frozen=True)
class Request:
    """What the client sent."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages", []))

    @property
    def system(self) -> str:
        return next((m["content"] for m in self.messages if m.get("role") == "system"), "")

    @property
    def user(self) -> str:
        return next((m["content"] for m in self.messages if m.get("role") == "user"), "")

    @property
    def response_format(self) -> str | None:
        """The requested ``response_format`` type, or None."""
        fmt = self.body.get("response_format")
        return fmt.get("type") if isinstance(fmt, dict) else None


Script = Union[Reply, Callable[[Request], Reply]]


def chat(content: str | None, *, model: str = "fake-model", finish_reason: str = "stop") -> Reply:
    """A normal chat-completion envelope whose message content is ``content``."""
    return Reply(200, {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                     "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    })


def json_reply(value: Any) -> Reply:
    """A completion whose content is ``value`` serialised as JSON."""
    return chat(json.dumps(value, ensure_ascii=False))


def garbage(text: str = "Sure! The keywords would be hiking and mountains, I think.") -> Reply:
    """A completion whose content is prose, not JSON."""
    return chat(text)


def error(status: int, message: str = "fake server error", *, retry_after: str | None = None) -> Reply:
    """An OpenAI-style error body with ``status`` (and optionally a ``Retry-After`` header)."""
    headers = (("Retry-After", retry_after),) if retry_after is not None else ()
    return Reply(status, {"error": {"message": message, "type": "server_error" if status >= 500 else
                                    "invalid_request_error", "code": None}}, headers)


def raw(status: int, body: str, content_type: str = "text/plain") -> Reply:
    """Any body with any content type (e.g. an HTML error page from a proxy)."""
    return Reply(status, body, (("Content-Type", content_type),))


def slow(seconds: float, then: Reply | None = None) -> Reply:
    """``then`` (default: an empty JSON object reply), sent only after ``seconds``."""
    return replace(then if then is not None else json_reply({}), delay=seconds)


def envelope(body: Any) -> Reply:
    """A 200 whose whole body is ``body`` as JSON, whatever its shape (wrong types at any level)."""
    return Reply(200, json.dumps(body), (("Content-Type", "application/json"),))


def raw_bytes(body: bytes, status: int = 200, content_type: str = "application/json") -> Reply:
    """Exactly these bytes as the body (truncated JSON, invalid UTF-8, ...)."""
    return Reply(status, body, (("Content-Type", content_type),))


def drip(seconds_per_byte: float, then: Reply | None = None, *, headers_too: bool = False) -> Reply:
    """``then`` (default: a valid empty JSON reply) sent one byte at a time."""
    return replace(then if then is not None else json_reply({}), drip=seconds_per_byte, drip_headers=headers_too)


def huge(size: int, *, declare_length: bool = False, chunk: int = 65536) -> Reply:
    """A 200 chat completion whose content is ``size`` bytes of text, generated while it is sent
    (the server never holds it); ``declare_length`` sends a true ``Content-Length`` first."""
    head = b'{"choices":[{"index":0,"message":{"role":"assistant","content":"'
    tail = b'"},"finish_reason":"stop"}]}'
    filler = max(0, size - len(head) - len(tail))

    def stream() -> Iterator[bytes]:
        yield head
        left = filler
        while left > 0:
            n = min(chunk, left)
            yield b"a" * n
            left -= n
        yield tail

    return Reply(200, "", (("Content-Type", "application/json"),), generate=stream,
                 declare_length=len(head) + filler + len(tail) if declare_length else None)


def reject_format(kind: str, then: Script) -> Callable[[Request], Reply]:
    """Answer 400 to requests whose ``response_format`` is ``kind`` (and any weaker json kind
    listed after it in ``kind``, comma separated); otherwise behave like ``then``."""
    rejected = {k.strip() for k in kind.split(",")}

    def handle(request: Request) -> Reply:
        if request.response_format in rejected:
            return error(400, f"Invalid parameter: 'response_format' of type '{request.response_format}' "
                              "is not supported with this model.")
        return then(request) if callable(then) else then

    return handle


@dataclass
class _State:
    script: list[Script] = field(default_factory=list)
    default: Script | None = None
    requests: list[Request] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    stopping: threading.Event = field(default_factory=threading.Event)


class FakeOpenAI:
    """The server. ``url`` is the ``base_url`` to give :class:`amem.llm.LLMConfig`."""

    def __init__(self) -> None:
        self._state = _State()
        handler = _make_handler(self._state)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="fake-openai", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        port = self._server.server_address[1]
        return f"http://127.0.0.1:{port}/v1"

    @property
    def requests(self) -> list[Request]:
        """Every chat request received so far, in order."""
        with self._state.lock:
            return list(self._state.requests)

    def script(self, *items: Script) -> "FakeOpenAI":
        """Queue replies for the next requests, in order."""
        with self._state.lock:
            self._state.script.extend(items)
        return self

    def set_default(self, item: Script | None) -> None:
        """What to answer once the script is used up (None: a 500 saying so)."""
        with self._state.lock:
            self._state.default = item

    @property
    def pending(self) -> int:
        """Scripted replies not yet used."""
        with self._state.lock:
            return len(self._state.script)

    def close(self) -> None:
        self._state.stopping.set()  # wakes handlers sleeping in a slow reply
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def _make_handler(state: _State) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
            pass

        def do_POST(self) -> None:  # noqa: N802 - http.server's naming
            length = int(self.headers.get("Content-Length") or 0)
            data = self.rfile.read(length)
            if self.path != CHAT_PATH:
                self._send(Reply(404, {"error": {"message": f"no route {self.path}"}}))
                return
            try:
                body = json.loads(data or b"{}")
            except ValueError:
                self._send(Reply(400, {"error": {"message": "request body is not JSON"}}))
                return
            request = Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            with state.lock:
                state.requests.append(request)
                item = state.script.pop(0) if state.script else state.default
            if item is None:
                reply = error(500, "fake server: no scripted reply left")
            else:
                reply = item(request) if callable(item) else item
            if reply.delay and state.stopping.wait(reply.delay):
                return
            self._send(reply)

        def _send(self, reply: Reply) -> None:
            if isinstance(reply.body, dict):
                payload = json.dumps(reply.body).encode("utf-8")
                content_type = "application/json"
            elif isinstance(reply.body, bytes):
                payload, content_type = reply.body, "application/octet-stream"
            else:
                payload = reply.body.encode("utf-8")
                content_type = "text/plain; charset=utf-8"
            headers = dict(reply.headers)
            headers.setdefault("Content-Type", content_type)
            if reply.generate is None:
                headers["Content-Length"] = str(len(payload))
            elif reply.declare_length is not None:
                headers["Content-Length"] = str(reply.declare_length)
            head = f"HTTP/1.0 {reply.status} {self.responses.get(reply.status, ('',))[0]}\r\n"
            head += "".join(f"{name}: {value}\r\n" for name, value in headers.items()) + "\r\n"
            try:
                self._write(head.encode("latin-1"), reply.drip if reply.drip_headers else 0.0)
                if reply.generate is not None:
                    for part in reply.generate():
                        if state.stopping.is_set():
                            return
                        self.wfile.write(part)
                else:
                    self._write(payload, reply.drip)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout, a deadline, a size cap): exactly what is tested

        def _write(self, data: bytes, drip: float) -> None:
            if not drip:
                self.wfile.write(data)
                return
            for i in range(len(data)):
                if state.stopping.wait(drip):
                    return
                self.wfile.write(data[i:i + 1])
                self.wfile.flush()

    return Handler
