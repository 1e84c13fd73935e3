"""Moved to :mod:`amem.kernel.llm` (one family of LLM seams for amem and lcm)."""

from amem.kernel.llm import LLM as LLM  # moved to amem.kernel.llm; importers are switched at integration

__all__ = ["LLM"]
