"""The operator's repair kit: browse a store, rewrite / dissolve / repair / transplant summaries, backfill.

What lossless-claw's ``lcm-tui`` gives its users, as a library the CLI (``amem lcm browse ...``,
``tools/cli/lcm_kit.py``) and the inspector call. Modules:

- :mod:`lcm.operator.browse`: read-only views (conversations, message windows, the summary DAG,
  the context view, large files). Stable since the ``kit-browse`` tag.
- :mod:`lcm.operator.prompts`: the depth-aware summary templates (leaf, d1, d2, d3+), their
  export, loading and diff.
- :mod:`lcm.operator.repair`: every change is planned first (a dry run returning a plan with a
  diff and the token impact) and written by ``apply(plan)`` in one transaction that checks the
  rows are still as planned. Stable since the ``kit-repair`` tag.
- :mod:`lcm.operator.backfill`: import a transcript from before lcm, compact it, optionally
  transplant its summaries.
"""

from __future__ import annotations
