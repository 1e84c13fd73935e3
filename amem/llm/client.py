"""LLMClient: a small client for any OpenAI-compatible chat-completions endpoint.

It speaks ``POST {base_url}/chat/completions`` (OpenAI, Ollama's ``/v1``, llama.cpp server,
vLLM) over an injectable :class:`httpx.Client`, and adds what a memory store needs from a
flaky model server:

* retries with exponential backoff and jitter, *only* for connection errors, timeouts and
  HTTP 408/409/429/5xx (a sane ``Retry-After`` is honoured); any other status fails at once;
* a circuit breaker (:mod:`amem.kernel.breaker`) that stops calling a dead endpoint for a while;
  an unusable reply (not JSON, wrong types, empty) counts as a failure like an error status;
* an overall deadline per call (``LLMConfig.deadline``, retries and waits included): httpx
  timeouts are per read, so a server dripping one byte a second would never trip them. Each
  exchange runs on a worker thread the caller stops waiting for at the deadline; the worker
  reads the body in chunks and gives up as soon as nobody waits for it any more. A call that
  hits the deadline opens the circuit at once, so the next calls do not wait as long again;
* a cap on the reply size (``LLMConfig.max_reply_bytes``): the body is streamed and reading
  stops at the cap, so a huge reply costs at most the cap in memory;
* a structured-output ladder for :meth:`LLMClient.complete_json`: ``response_format`` of type
  ``json_schema``; if the endpoint rejects that, ``json_object``; if it rejects that too, a
  plain prompt whose reply is parsed and repaired (:mod:`amem.llm.jsonreply`). The rung that
  works is remembered for the life of the client.

Every failure is an :class:`amem.errors.LLMError` (an unusable reply: ``LLMResponseError``
with ``.raw``, whatever is wrong with it: wrong JSON types at any level, missing fields, not JSON,
empty, too large), so callers can fall back to offline enrichment.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Callable, TypeVar

import httpx

from ..errors import LLMError, LLMResponseError
from ..kernel.breaker import CircuitBreaker
from .config import RUNGS, LLMConfig, Rung
from .reply import reply_json, reply_text, snippet

log = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 409, 429})
#: words in a 400/422 body that mean "this server does not do that response_format"
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "structured output", "guided", "grammar")
#: how much of an over-long reply is kept on the error as ``.raw``
_RAW_HEAD = 4096

T = TypeVar("T")


class _FormatRejected(Exception):
    """The endpoint refused the requested ``response_format`` (internal: drives the ladder)."""


class _DeadlineExceeded(Exception):
    """The call's overall deadline passed (internal: turned into an LLMError by ``_post``)."""


class _ReplyTooLarge(Exception):
    """The reply passed ``max_reply_bytes``; ``head`` is its beginning, for the error's ``.raw``."""

    def __init__(self, detail: str, head: str) -> None:
        super().__init__(detail)
        self.head = head


class _Abandoned(Exception):
    """The caller stopped waiting for this exchange (the deadline passed): stop reading."""


class LLMClient:
    """Chat completions with retries, a circuit breaker and JSON replies.

    Args:
        config: endpoint, model, timeouts, retry and breaker settings.
        http: an :class:`httpx.Client` to send through (tests pass one on a ``MockTransport``);
            when omitted the client makes and owns one. The config's timeouts are applied to
            every request either way.
        clock: monotonic seconds, for the circuit breaker and the overall deadline
            (default :func:`time.monotonic`).
        sleep: how to wait between retries (default :func:`time.sleep`).
        rng: source of jitter (default: a fresh :class:`random.Random`).
    """

    def __init__(self, config: LLMConfig, *, http: httpx.Client | None = None,
                 clock: Callable[[], float] | None = None, sleep: Callable[[float], None] | None = None,
                 rng: random.Random | None = None) -> None:
        self.config = config
        self._timeout = httpx.Timeout(connect=config.connect_timeout, read=config.read_timeout,
                                      write=config.read_timeout, pool=config.connect_timeout)
        self._owns_http = http is None
        self._http = http if http is not None else httpx.Client(timeout=self._timeout)
        self._sleep = sleep or time.sleep
        self._clock = clock or time.monotonic
        self._rng = rng or random.Random()
        self._breaker = CircuitBreaker(config.breaker_threshold, config.breaker_cooldown, clock=clock,
                                       name=config.chat_url, refuse=LLMError)
        self._lock = threading.Lock()
        self._rung: Rung = config.structured_output

    # ------------------------------------------------------------------ public surface

    @property
    def model(self) -> str:
        return self.config.model

    @property
    def rung(self) -> Rung:
        """The structured-output rung :meth:`complete_json` will try first."""
        return self._rung

    @property
    def breaker(self) -> CircuitBreaker:
        return self._breaker

    def complete(self, system: str, user: str, *, max_tokens: int | None = None, model: str | None = None,
                 deadline: float | None = None, trip_on_deadline: bool = True) -> str:
        """Send one system + user message and return the model's text reply.

        ``model`` and ``deadline`` (seconds) replace the config's for this call only: one client,
        and so one breaker, serves callers that want different models (lcm's ``summaryModel`` and
        ``expansionModel``) or a shorter deadline (``summaryTimeoutMs``). ``trip_on_deadline=False``
        is for a deadline the caller chose (a tool's ``timeoutMs``): passing it says nothing about
        the endpoint, so it does not open the circuit.

        Raises:
            LLMError: connection failure, timeout or error status after retries, an open circuit,
                or the overall deadline passed.
            LLMResponseError: the reply is malformed or has no text; ``.raw`` holds it.
        """
        if deadline is not None and not deadline > 0:
            raise ValueError(f"deadline must be > 0 seconds, got {deadline!r}")
        seconds = self.config.deadline if deadline is None else deadline
        payload = self._payload(system, user, max_tokens=max_tokens, rung="prompt", schema=None, name="")
        if model:
            payload["model"] = model
        raw = self._post(payload, allow_format_rejection=False, deadline=self._clock() + seconds,
                         trip_on_deadline=trip_on_deadline, seconds=seconds)
        return self._usable(lambda: reply_text(raw))

    def complete_json(self, system: str, user: str, *, schema: dict[str, Any], name: str) -> dict[str, Any]:
        """Ask for a JSON object satisfying ``schema`` and return it, parsed and checked.

        The schema also goes into the system message as text, so that the ``json_object`` and
        plain-prompt rungs know what to produce.

        Raises:
            LLMError: as :meth:`complete`.
            LLMResponseError: the reply is not JSON, or not of the schema's shape; ``.raw`` holds it.
        """
        system = (f"{system}\n\nReply with one JSON object only, no prose, matching this JSON Schema "
                  f"(named {name!r}):\n{json.dumps(schema, ensure_ascii=False, sort_keys=True)}")
        deadline = self._clock() + self.config.deadline
        rung = self._rung
        while True:
            payload = self._payload(system, user, max_tokens=None, rung=rung, schema=schema, name=name)
            try:
                raw = self._post(payload, allow_format_rejection=rung != "prompt", deadline=deadline)
            except _FormatRejected as rejected:
                lower = RUNGS[RUNGS.index(rung) + 1]
                with self._lock:
                    if self._rung == rung:
                        self._rung = lower
                log.warning("LLM endpoint %s rejected response_format %r (%s); using %r from now on",
                            self.config.chat_url, rung, rejected, lower)
                rung = lower
                continue
            return self._usable(lambda: reply_json(raw, schema))

    def close(self) -> None:
        """Close the HTTP client if this client made it."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> "LLMClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

    def _usable(self, parse: Callable[[], T]) -> T:
        """``parse()`` of a 2xx reply; the breaker counts an unusable reply as a failure."""
        try:
            value = parse()
        except LLMResponseError:
            self._breaker.record_failure()
            raise
        self._breaker.record_success()
        return value

    def _payload(self, system: str, user: str, *, max_tokens: int | None, rung: Rung,
                 schema: dict[str, Any] | None, name: str) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "model": self.config.model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
            "temperature": self.config.temperature,
            "stream": False,
        }
        limit = max_tokens if max_tokens is not None else self.config.max_tokens
        if limit is not None:
            payload["max_tokens"] = limit
        if rung == "json_schema" and schema is not None:
            payload["response_format"] = {"type": "json_schema", "json_schema": {"name": name, "schema": schema}}
        elif rung == "json_object" and schema is not None:
            payload["response_format"] = {"type": "json_object"}
        return payload

    def _post(self, payload: dict[str, Any], *, allow_format_rejection: bool, deadline: float,
              trip_on_deadline: bool = True, seconds: float | None = None) -> str:
        """POST with retries and the breaker until ``deadline``; return the raw text of a 2xx reply."""
        url = self.config.chat_url
        attempts = self.config.max_retries + 1
        headers = {"Authorization": f"Bearer {self.config.api_key}", "Accept": "application/json",
                   # a compressed body could expand far past max_reply_bytes within one chunk
                   "Accept-Encoding": "identity"}
        reason = ""
        for attempt in range(attempts):
            try:
                self._breaker.check()
            except LLMError as open_circuit:
                if reason:
                    raise LLMError(f"{open_circuit} (last failure: {reason})") from None
                raise
            retry_after: float | None = None
            try:
                status, text, reply_headers = self._exchange(url, payload, headers, deadline)
            except _DeadlineExceeded:
                earlier = f"; earlier failure: {reason}" if reason else ""
                if not trip_on_deadline:  # the caller's own, shorter deadline
                    raise LLMError(f"LLM call to {url} passed the caller's deadline of {seconds} s{earlier}") from None
                # A hung or dripping endpoint would hold each of the add's next calls (and every
                # other caller's) just as long: stop calling it for the cooldown at once.
                self._breaker.trip(f"a call passed its overall deadline of {self.config.deadline} s")
                raise LLMError(f"LLM call to {url} passed its overall deadline of {self.config.deadline} s "
                               f"(llm_deadline_s){earlier}") from None
            except _ReplyTooLarge as big:
                self._breaker.record_failure()
                raise LLMResponseError(f"LLM endpoint {url} sent a reply over {self.config.max_reply_bytes} bytes "
                                       f"(llm_max_reply_bytes; {big}); stopped reading it", raw=big.head) from None
            except httpx.TimeoutException as exc:
                if not trip_on_deadline and self._clock() >= deadline:
                    # The read timeout was cut to the caller's deadline: not the endpoint's fault.
                    raise LLMError(f"LLM call to {url} passed the caller's deadline of {seconds} s") from None
                reason = f"timed out ({type(exc).__name__}, connect {self.config.connect_timeout} s, "\
                         f"read {self.config.read_timeout} s)"
            except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                reason = f"connection failed ({type(exc).__name__}: {exc})"
            except httpx.HTTPError as exc:  # a bad URL or a local protocol error: retrying cannot help
                self._breaker.record_failure()
                raise LLMError(f"LLM request to {url} failed: {type(exc).__name__}: {exc}") from exc
            else:
                if 200 <= status < 300:
                    return text  # the breaker is told once the reply proves usable (``_usable``)
                if allow_format_rejection and status in (400, 422) and _mentions_format(text):
                    raise _FormatRejected(f"HTTP {status}: {snippet(text)}")
                if status not in RETRYABLE_STATUS and status < 500:
                    self._breaker.record_failure()
                    raise LLMError(f"LLM endpoint {url} answered HTTP {status} (not retried): {snippet(text)}")
                reason = f"HTTP {status}: {snippet(text)}"
                retry_after = self._retry_after(reply_headers)
            self._breaker.record_failure()
            if attempt + 1 < attempts:
                delay = self._delay(attempt, retry_after)
                left = deadline - self._clock()
                if delay >= left:
                    raise LLMError(f"LLM request to {url} failed ({reason}); not retried: waiting {delay:.2f} s "
                                   f"would pass the overall deadline of {self.config.deadline} s "
                                   f"(llm_deadline_s; {max(left, 0.0):.2f} s left)")
                log.warning("LLM request to %s failed (%s); retry %d of %d in %.2f s",
                            url, reason, attempt + 1, attempts - 1, delay)
                self._sleep(delay)
        raise LLMError(f"LLM request to {url} failed after {attempts} attempt(s): {reason}")

    def _exchange(self, url: str, payload: dict[str, Any], headers: dict[str, str],
                  deadline: float) -> tuple[int, str, httpx.Headers]:
        """One request and its whole reply, or :class:`_DeadlineExceeded` at the deadline.

        The exchange runs on a daemon thread because no httpx timeout bounds a whole exchange:
        a server can drip its headers or body a byte at a time, each read well within the read
        timeout. The caller waits for the thread at most until the deadline. A thread left
        behind stops at its next body chunk (it sees ``abandoned``), at a read timeout, or, for a
        server dripping its headers, once they end (h11 caps their size); the breaker, opened by
        the deadline, keeps such threads from piling up.
        """
        left = deadline - self._clock()
        if left <= 0:
            raise _DeadlineExceeded()
        connect, read = min(self.config.connect_timeout, left), min(self.config.read_timeout, left)
        timeout = httpx.Timeout(connect=connect, read=read, write=read, pool=connect)
        outcome: list[tuple[int, str, httpx.Headers] | Exception] = []
        done = threading.Event()
        abandoned = threading.Event()

        def work() -> None:
            try:
                outcome.append(self._read(url, payload, headers, timeout, abandoned))
            except Exception as exc:  # handed to the caller, who re-raises it in its own thread
                outcome.append(exc)
            finally:
                done.set()

        threading.Thread(target=work, name="amem-llm-exchange", daemon=True).start()
        if not done.wait(left):
            abandoned.set()
            raise _DeadlineExceeded()
        result = outcome[0]
        if isinstance(result, Exception):
            raise result
        return result

    def _read(self, url: str, payload: dict[str, Any], headers: dict[str, str], timeout: httpx.Timeout,
              abandoned: threading.Event) -> tuple[int, str, httpx.Headers]:
        """POST and read the body in chunks, never keeping more than ``max_reply_bytes``."""
        cap = self.config.max_reply_bytes
        with self._http.stream("POST", url, json=payload, headers=headers, timeout=timeout) as response:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > cap:
                raise _ReplyTooLarge(f"Content-Length {declared}", head="")
            chunks: list[bytes] = []
            size = 0
            for chunk in response.iter_bytes():
                if abandoned.is_set():
                    raise _Abandoned()
                size += len(chunk)
                if size > cap:
                    head = b"".join(chunks)[:_RAW_HEAD] + chunk[:_RAW_HEAD]
                    raise _ReplyTooLarge(f"more than {cap} bytes read", head=_decode(head[:_RAW_HEAD], response))
                chunks.append(chunk)
            return response.status_code, _decode(b"".join(chunks), response), response.headers

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after
        cfg = self.config
        delay = min(cfg.backoff_max, cfg.backoff_base * (2 ** attempt))
        return float(delay * (1.0 - cfg.jitter * self._rng.random()))

    def _retry_after(self, headers: httpx.Headers) -> float | None:
        """The server's ``Retry-After`` in seconds when present and sane, else None."""
        value = headers.get("retry-after")
        if value is None:
            return None
        seconds: float | None
        try:
            seconds = float(value)
        except ValueError:
            try:
                when = parsedate_to_datetime(value)
            except (TypeError, ValueError):
                seconds = None
            else:
                if when.tzinfo is None:
                    when = when.replace(tzinfo=timezone.utc)
                seconds = (when - datetime.now(timezone.utc)).total_seconds()
        if seconds is None or not 0.0 <= seconds <= self.config.retry_after_max:
            log.warning("ignoring Retry-After %r from %s (not a delay within 0..%s s); using backoff",
                        value, self.config.chat_url, self.config.retry_after_max)
            return None
        return seconds


def _decode(data: bytes, response: httpx.Response) -> str:
    """The body as text: its declared charset, else UTF-8; undecodable bytes become U+FFFD."""
    charset = response.charset_encoding or "utf-8"
    try:
        return data.decode(charset, errors="replace")
    except LookupError:  # a charset Python does not know
        return data.decode("utf-8", errors="replace")


def _mentions_format(text: str) -> bool:
    lower = text.lower()
    return any(word in lower for word in _FORMAT_WORDS)
