"""CLI commands routed through a running ``amem serve --http`` against the same commands run
directly on the store, in one process, rounds interleaved.

    python -m benchmarks.routed_cli_bench --rounds 5 [--tree DIR] [--out r.json]

A small store (hashing embedder, a few notes) under a temporary home. Each round starts the
server, runs every command through it (the store is held, so the CLI routes), stops the server
(SIGINT, as a user would), then runs the same commands directly; the next round starts the
server again, so load elsewhere on the machine hits both sides alike. Each command is a fresh
``python -m tools.cli`` with ``PYTHONPATH`` naming the tree (``--tree``: another checkout, to
compare code; default this one); its wall time, user + system CPU and peak RSS come from
``wait4``. The server's own work is not counted. Bytecode is written (the first round compiles
the tree; ``PYTHONDONTWRITEBYTECODE`` would add compile time to every run).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
NOTES = ["Alice prefers green tea over coffee", "Bob rides a blue bicycle to work",
         "The staging database moved to db-2.internal on Monday"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _run(env: dict[str, str], args: list[str]) -> dict[str, float]:
    # cwd: ``-m`` puts the working directory first on sys.path, before PYTHONPATH
    """One command: wall s, CPU s (user, system), peak RSS MB; refuses a failing command."""
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "tools.cli", *args], env=env,
                            cwd=env["PYTHONPATH"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"amem {' '.join(args)} failed ({proc.returncode}): {err.decode()[-2000:]}")
    return {"wall": wall, "user": usage.ru_utime, "sys": usage.ru_stime,
            "rss_mb": usage.ru_maxrss / 1024}


def _serve(env: dict[str, str], home: Path) -> subprocess.Popen[bytes]:
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "tools.cli", "serve", "--http", "--port",
                             str(port), "--no-scheduler"], env=env, cwd=env["PYTHONPATH"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while True:
        if proc.poll() is not None:
            raise SystemExit("the server exited at start")
        if (home / "server.json").exists():
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return proc
            except OSError:
                pass
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("the server did not start within 120 s")
        time.sleep(0.1)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose CLI runs")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args(argv)
    home = Path(tempfile.mkdtemp(prefix="amem-routed-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AMEM_", "LCM_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update({"AMEM_HOME": str(home), "AMEM_EMBEDDER": "hashing", "AMEM_AGENT": "bench",
                "AMEM_HEAT": "false", "PYTHONPATH": str(args.tree.resolve())})
    ids = []
    for text in NOTES:
        out = subprocess.run([sys.executable, "-m", "tools.cli", "add", text, "--no-enrich",
                              "--json"], env=env, cwd=env["PYTHONPATH"], capture_output=True,
                             text=True, check=True)
        ids.append(json.loads(out.stdout)["id"])
    commands = {"list": ["list"], "get": ["get", ids[0]], "status": ["status"],
                "search": ["search", "bicycle"]}
    samples: dict[str, dict[str, list[dict[str, float]]]] = {
        mode: {name: [] for name in commands} for mode in ("routed", "direct")}
    for _ in range(args.rounds):
        server = _serve(env, home)
        try:
            for name, cmd in commands.items():
                samples["routed"][name].append(_run(env, cmd))
        finally:
            server.send_signal(signal.SIGINT)
            server.wait(timeout=60)
        for name, cmd in commands.items():
            samples["direct"][name].append(_run(env, cmd))
    table: dict[str, Any] = {}
    for name in commands:
        row: dict[str, Any] = {}
        for mode in ("routed", "direct"):
            runs = samples[mode][name]
            row[mode] = {k: round(statistics.median(r[k] for r in runs), 3)
                         for k in ("wall", "user", "sys", "rss_mb")}
        row["routed/direct cpu"] = round(
            (row["routed"]["user"] + row["routed"]["sys"])
            / (row["direct"]["user"] + row["direct"]["sys"]), 2)
        row["routed/direct wall"] = round(row["routed"]["wall"] / row["direct"]["wall"], 2)
        table[name] = row
    result = {"tree": str(args.tree.resolve()), "rounds": args.rounds, "commands": table,
              "load": os.getloadavg()}
    print(f"tree {result['tree']}, {args.rounds} rounds, load {result['load'][0]:.1f}")
    print(f"{'command':<8} {'routed wall/cpu/rss':>26} {'direct wall/cpu/rss':>26} "
          f"{'cpu ratio':>9} {'wall ratio':>10}")
    for name, row in table.items():
        def fmt(side: dict[str, float]) -> str:
            return f"{side['wall']:.2f}s {side['user'] + side['sys']:.2f}s {side['rss_mb']:.0f}MB"
        print(f"{name:<8} {fmt(row['routed']):>26} {fmt(row['direct']):>26} "
              f"{row['routed/direct cpu']:>8}x {row['routed/direct wall']:>9}x")
    if args.out:
        args.out.write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
