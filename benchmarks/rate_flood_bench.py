"""One key floods the HTTP server while another searches: the other key's latency with request
budgets held, answered at once, and off.

    python -m benchmarks.rate_flood_bench [--embedder e5-small|hashing] [--flooders 4]
                                         [--searches 25] [--bad-keys] [--out r.json]

A real ``http_app`` on 127.0.0.1 (uvicorn in a thread, as ``amem serve --http``), an in-memory
store with 200 notes of bob's. Bob opens an MCP session and sends ``--searches`` searches
alone, then again while ``--flooders`` connections of alice's key send ``memory_add`` calls
back to back (each waits for its answer, as a looping agent does). Three servers: the default
budgets (refusals held up to ``hold_s``), the same budgets with refusals answered at once
(``hold_s = 0``), and no budgets. Reported: bob's p50 / p90 in ms alone and beside the flood,
alice's requests served and refused in that time, her notes written.

``--bad-keys``: the flooders send keys that are not valid (shaped like keys, of no issued id:
the shape of key guessing) instead of alice's; "served" is then the requests answered 401, and
"refused" those past the budget of requests without a valid key (429, held like any refusal).
"""

from __future__ import annotations

import argparse
import json
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx

_INIT = (b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":'
         b'"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"0"}}}')
_ADD = ('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_add",'
        '"arguments":{"text":"flood note %d written by a looping agent"}}}')
_SEARCH = ('{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"memory_search",'
           '"arguments":{"query":"green tea"}}}')
_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _session(http: httpx.Client, url: str, secret: str) -> dict[str, str]:
    opened = http.post(url, content=_INIT, headers={**_HEADERS, "Authorization": f"Bearer {secret}"})
    headers = {**_HEADERS, "Authorization": f"Bearer {secret}",
               "Mcp-Session-Id": opened.headers["mcp-session-id"],
               "Mcp-Protocol-Version": "2025-06-18"}
    http.post(url, content=b'{"jsonrpc":"2.0","method":"notifications/initialized"}', headers=headers)
    return headers


def _searches(url: str, secret: str, n: int) -> list[float]:
    took = []
    with httpx.Client(timeout=60) as http:
        headers = _session(http, url, secret)
        for i in range(n):
            began = time.perf_counter()
            answer = http.post(url, content=(_SEARCH % i).encode(), headers=headers)
            took.append(time.perf_counter() - began)
            if answer.status_code != 200:
                raise SystemExit(f"bob was refused: {answer.text[:300]}")
    return took


def one_server(name: str, limits: Any, embedder: str, flooders: int, searches: int,
               bad_keys: bool = False) -> dict[str, Any]:
    import uvicorn

    from amem import MemoryStore
    from tools import ToolFacade
    from tools.http_guard import GuardConfig
    from tools.keys import KeyStore
    from tools.mcp_server import http_app

    home = Path(tempfile.mkdtemp(prefix="rate-flood-"))
    keys = KeyStore(home / "keys.json")
    _, alice = keys.add(agent="alice")
    _, bob = keys.add(agent="bob")
    options: dict[str, Any] = {}
    if embedder == "hashing":
        from amem.embed.hashing import HashingEmbedder

        options["embedder"] = HashingEmbedder()
    with MemoryStore(":memory:", agent_id="bob", **options) as memory:
        for i in range(200):
            memory.add(f"bob's note {i}: green tea number {i}, brewed for {i % 7} minutes",
                       enrich=False)
        app = http_app(ToolFacade(memory, None, agent_id="bob"),
                       guard=GuardConfig(keys=keys, rate_limits=limits))
        port = _free_port()
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_config=None,
                                               access_log=False))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not server.started:
            time.sleep(0.02)
        url = f"http://127.0.0.1:{port}/mcp"
        try:
            alone = _searches(url, bob, searches)
            stop = threading.Event()
            counts: dict[str, int] = {}
            lock = threading.Lock()

            def flood() -> None:
                with httpx.Client(timeout=60) as http:
                    headers = (_session(http, url, alice) if not bad_keys else
                               {**_HEADERS, "Authorization": "Bearer amem_0123456789ab_guess"})
                    n = 0
                    while not stop.is_set():
                        n += 1
                        status = http.post(url, content=(_ADD % (n, n)).encode(),
                                           headers=headers).status_code
                        with lock:
                            counts[str(status)] = counts.get(str(status), 0) + 1

            threads = [threading.Thread(target=flood) for _ in range(flooders)]
            for t in threads:
                t.start()
            time.sleep(1.0)  # the flood is under way (alice's burst spent)
            flooded = _searches(url, bob, searches)
            stop.set()
            for t in threads:
                t.join()
            written = memory.count(agent_id="alice")
        finally:
            server.should_exit = True
            thread.join(timeout=10)

    def ms(values: list[float], q: float) -> float:
        return round(sorted(values)[min(len(values) - 1, int(len(values) * q))] * 1000, 1)

    return {"server": name, "alone_p50_ms": round(statistics.median(alone) * 1000, 1),
            "alone_p90_ms": ms(alone, 0.9), "flood_p50_ms": round(statistics.median(flooded) * 1000, 1),
            "flood_p90_ms": ms(flooded, 0.9),
            "alice_served": counts.get("401" if bad_keys else "200", 0),
            "alice_refused": counts.get("429", 0), "alice_notes": written}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--embedder", choices=["e5-small", "hashing"], default="e5-small")
    parser.add_argument("--flooders", type=int, default=4)
    parser.add_argument("--searches", type=int, default=25,
                        help="bob's searches per phase (two phases stay inside his read burst)")
    parser.add_argument("--bad-keys", action="store_true",
                        help="the flood sends keys that are not valid instead of alice's")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from tools.ratelimit import RateLimits

    rows = [one_server(name, limits, args.embedder, args.flooders, args.searches, args.bad_keys)
            for name, limits in (("budgets, refusals held (default)", RateLimits()),
                                 ("budgets, refusals at once (hold_s 0)", RateLimits(hold_s=0)),
                                 ("no budgets", RateLimits(enabled=False)))]
    served = "answered 401" if args.bad_keys else "served"
    print(f"| server | bob alone p50 / p90 ms | bob beside the flood p50 / p90 ms | flood {served} / "
          "refused | alice's notes |\n|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['server']} | {r['alone_p50_ms']} / {r['alone_p90_ms']} | {r['flood_p50_ms']} / "
              f"{r['flood_p90_ms']} | {r['alice_served']} / {r['alice_refused']} | {r['alice_notes']} |")
    if args.out:
        args.out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
