"""Runtime errors: each names the rank and the op, so a failed step says where it stopped."""

from __future__ import annotations


class PipelineError(RuntimeError):
    """A pipeline step cannot run or did not finish; the message names the rank and op."""


class ScheduleMismatchError(PipelineError):
    """The schedule does not fit this process group or these stage modules."""


class PipelineTimeoutError(PipelineError):
    """A receive or send did not complete within the configured timeout (dead or stuck peer)."""
