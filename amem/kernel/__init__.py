"""The shared kernel: the basics amem and lcm both build on, written once.

    errors     the coded error root both exception trees subclass (``MemoryToolError``)
    clock      the ``Clock`` seam, the system clock and a manual clock for tests
    llm        the LLM seams (text, deadline, JSON, the full client)
    breaker    the circuit breaker of amem's LLM client and lcm's summarizer
    text       the CJK script table and the helpers built on it
    fusion     reciprocal rank fusion, one deterministic tie-break
    lazy       package attributes that load on first use (PEP 562)
    beside     two steps at once, one on a worker shared by the process (reads of both)
    encoding   a file's bytes as text for the importers (byte-order marks; where it is not UTF-8)

Rules that keep it a kernel: its modules import only the standard library and each other
(never the rest of ``amem``, never ``lcm``), and this file imports none of them, so
``import amem.kernel.clock`` costs a few milliseconds and loads no store, engine or model.
``lcm`` may import ``amem.kernel.*`` and nothing else of ``amem``.
"""

from __future__ import annotations
