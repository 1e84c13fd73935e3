"""Another user account on the same machine, as the issue's attacker was: uid ``nobody``
with a plain HTTP client (the system Python's urllib) against the server on 127.0.0.1.

Needs root to switch user (CI runs the tests as root); skipped with the reason otherwise.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .conftest import Served

SETPRIV = shutil.which("setpriv")
PYTHON = "/usr/bin/python3"

#: run as nobody: every request without a key, then a try at the key file; prints JSON
CLIENT = r"""
import json, sys, urllib.request, urllib.error
root, keyfile = sys.argv[1], sys.argv[2]
out = {}
def call(name, method, path, body=None, ctype=None):
    req = urllib.request.Request(root + path, data=body, method=method)
    req.add_header("Accept", "application/json, text/event-stream")
    if ctype:
        req.add_header("Content-Type", ctype)
    req.add_header("X-Amem-Agent", "alice")
    try:
        with urllib.request.urlopen(req, timeout=20) as res:
            out[name] = [res.status, res.read().decode()[:300]]
    except urllib.error.HTTPError as e:
        out[name] = [e.code, e.read().decode()[:300]]
init = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"n","version":"0"}}}'
call("mcp", "POST", "/mcp", init, "application/json")
call("assemble", "GET", "/lcm/assemble?budget=1000")
call("ingest_json", "POST", "/lcm/ingest", b'{"messages":[{"role":"user","content":"planted by a web page"}]}', "application/json")
call("ingest_text", "POST", "/lcm/ingest", b'{"messages":[{"role":"user","content":"planted by a web page"}]}', "text/plain")
try:
    open(keyfile).read()
    out["keyfile"] = "read"
except OSError as e:
    out["keyfile"] = type(e).__name__
import os
out["uid"] = os.getuid()
print(json.dumps(out))
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="switching to uid nobody needs root (CI runs as root)")
@pytest.mark.skipif(SETPRIV is None or not Path(PYTHON).exists(),
                    reason="needs setpriv (util-linux) and /usr/bin/python3")
def test_another_local_user_without_a_key_reads_and_writes_nothing(served: Served) -> None:
    assert SETPRIV is not None
    done = subprocess.run([SETPRIV, "--reuid=nobody", "--regid=nogroup", "--clear-groups",
                           PYTHON, "-I", "-c", CLIENT, served.root, str(served.keys.path)],
                          capture_output=True, text=True, timeout=60, cwd="/")
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen.pop("uid") != 0
    assert seen.pop("keyfile") == "PermissionError"
    for name, (status, body) in seen.items():
        expected = 415 if name == "ingest_text" else 401
        assert status == expected, (name, status, body)
        assert "door code" not in body and "Porto" not in body
    assert int(served.lcm.db.scalar(  # type: ignore[attr-defined]
        "SELECT count(*) FROM messages WHERE content = 'planted by a web page'")) == 0
