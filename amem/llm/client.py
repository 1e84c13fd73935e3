"""LLMClient: a small client for any OpenAI-compatible chat-completions endpoint.

It speaks ``POST {base_url}/chat/completions`` (OpenAI, Ollama's ``/v1``, llama.cpp server,
vLLM) over an injectable :class:`httpx.Client`, and adds what a memory store needs from a
flaky model server:

* retries with exponential backoff and jitter, *only* for connection errors, timeouts and
  HTTP 408/409/429/5xx (a sane ``Retry-After`` is honoured); any other status fails at once;
* a circuit breaker (:mod:`amem.llm.breaker`) that stops calling a dead endpoint for a while;
* a structured-output ladder for :meth:`LLMClient.complete_json`: ``response_format`` of type
  ``json_schema``; if the endpoint rejects that, ``json_object``; if it rejects that too, a
  plain prompt whose reply is parsed and repaired (:mod:`amem.llm.jsonreply`). The rung that
  works is remembered for the life of the client.

Every failure is an :class:`amem.errors.LLMError` (an unusable reply: ``LLMResponseError``
with ``.raw``), so callers can fall back to offline enrichment.
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Callable

import httpx

from ..errors import LLMError, LLMResponseError
from .breaker import CircuitBreaker
from .config import RUNGS, LLMConfig, Rung
from .jsonreply import check_shape, parse_json_object

log = logging.getLogger(__name__)

RETRYABLE_STATUS = frozenset({408, 409, 429})
#: words in a 400/422 body that mean "this server does not do that response_format"
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "structured output", "guided", "grammar")
_SNIPPET = 300


class _FormatRejected(Exception):
    """The endpoint refused the requested ``response_format`` (internal: drives the ladder)."""


class LLMClient:
    """Chat completions with retries, a circuit breaker and JSON replies.

    Args:
        config: endpoint, model, timeouts, retry and breaker settings.
        http: an :class:`httpx.Client` to send through (tests pass one on a ``MockTransport``);
            when omitted the client makes and owns one. The config's timeouts are applied to
            every request either way.
        clock: monotonic seconds, for the circuit breaker (default :func:`time.monotonic`).
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
        self._rng = rng or random.Random()
        self._breaker = CircuitBreaker(config.breaker_threshold, config.breaker_cooldown, clock=clock,
                                       name=config.chat_url)
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

    def complete(self, system: str, user: str, *, max_tokens: int | None = None) -> str:
        """Send one system + user message and return the model's text reply.

        Raises:
            LLMError: connection failure, timeout or error status after retries, or an open circuit.
            LLMResponseError: the reply has no text.
        """
        payload = self._payload(system, user, max_tokens=max_tokens, rung="prompt", schema=None, name="")
        body, raw = self._post(payload, allow_format_rejection=False)
        return _content(body, raw)

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
        rung = self._rung
        while True:
            payload = self._payload(system, user, max_tokens=None, rung=rung, schema=schema, name=name)
            try:
                body, raw = self._post(payload, allow_format_rejection=rung != "prompt")
            except _FormatRejected as rejected:
                lower = RUNGS[RUNGS.index(rung) + 1]
                with self._lock:
                    if self._rung == rung:
                        self._rung = lower
                log.warning("LLM endpoint %s rejected response_format %r (%s); using %r from now on",
                            self.config.chat_url, rung, rejected, lower)
                rung = lower
                continue
            text = _content(body, raw)
            value = parse_json_object(text)
            check_shape(value, schema, raw=text)
            return value

    def close(self) -> None:
        """Close the HTTP client if this client made it."""
        if self._owns_http:
            self._http.close()

    def __enter__(self) -> "LLMClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ internals

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

    def _post(self, payload: dict[str, Any], *, allow_format_rejection: bool) -> tuple[dict[str, Any], str]:
        """POST with retries and the breaker; return the decoded body and its raw text."""
        url = self.config.chat_url
        attempts = self.config.max_retries + 1
        headers = {"Authorization": f"Bearer {self.config.api_key}", "Accept": "application/json"}
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
                response = self._http.post(url, json=payload, headers=headers, timeout=self._timeout)
            except httpx.TimeoutException as exc:
                reason = f"timed out ({type(exc).__name__}, connect {self.config.connect_timeout} s, "\
                         f"read {self.config.read_timeout} s)"
            except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
                reason = f"connection failed ({type(exc).__name__}: {exc})"
            except httpx.HTTPError as exc:  # a bad URL or a local protocol error: retrying cannot help
                self._breaker.record_failure()
                raise LLMError(f"LLM request to {url} failed: {type(exc).__name__}: {exc}") from exc
            else:
                status = response.status_code
                text = response.text
                if 200 <= status < 300:
                    try:
                        body = response.json()
                    except ValueError:
                        self._breaker.record_failure()
                        raise LLMResponseError(f"LLM endpoint {url} answered HTTP {status} with a non-JSON body",
                                               raw=text) from None
                    self._breaker.record_success()
                    if not isinstance(body, dict):
                        raise LLMResponseError(f"LLM endpoint {url} answered with JSON that is not an object",
                                               raw=text)
                    return body, text
                if allow_format_rejection and status in (400, 422) and _mentions_format(text):
                    raise _FormatRejected(f"HTTP {status}: {_snippet(text)}")
                if status not in RETRYABLE_STATUS and status < 500:
                    self._breaker.record_failure()
                    raise LLMError(f"LLM endpoint {url} answered HTTP {status} (not retried): {_snippet(text)}")
                reason = f"HTTP {status}: {_snippet(text)}"
                retry_after = self._retry_after(response)
            self._breaker.record_failure()
            if attempt + 1 < attempts:
                delay = self._delay(attempt, retry_after)
                log.warning("LLM request to %s failed (%s); retry %d of %d in %.2f s",
                            url, reason, attempt + 1, attempts - 1, delay)
                self._sleep(delay)
        raise LLMError(f"LLM request to {url} failed after {attempts} attempt(s): {reason}")

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return retry_after
        cfg = self.config
        delay = min(cfg.backoff_max, cfg.backoff_base * (2 ** attempt))
        return float(delay * (1.0 - cfg.jitter * self._rng.random()))

    def _retry_after(self, response: httpx.Response) -> float | None:
        """The server's ``Retry-After`` in seconds when present and sane, else None."""
        value = response.headers.get("retry-after")
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


def _content(body: dict[str, Any], raw: str) -> str:
    """``choices[0].message.content`` as text; an empty or missing one is an LLMResponseError."""
    try:
        choice = body["choices"][0]
        message = choice["message"]
    except (KeyError, IndexError, TypeError):
        raise LLMResponseError("the LLM reply has no choices[0].message", raw=raw) from None
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):  # some servers send content parts
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    if not isinstance(content, str) or not content.strip():
        refusal = message.get("refusal") if isinstance(message, dict) else None
        detail = f" (refusal: {refusal})" if refusal else ""
        raise LLMResponseError(f"the LLM reply is empty{detail}", raw=raw)
    if isinstance(choice, dict) and choice.get("finish_reason") == "length":
        log.warning("LLM reply was cut off at the token limit; it may not parse")
    return content


def _mentions_format(text: str) -> bool:
    lower = text.lower()
    return any(word in lower for word in _FORMAT_WORDS)


def _snippet(text: str) -> str:
    flat = " ".join(text.split())
    return flat[:_SNIPPET] + ("..." if len(flat) > _SNIPPET else "")
