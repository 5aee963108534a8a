"""Exceptions shared across the solver (kept apart so any module can raise them)."""


class NotApplicableError(ValueError):
    """The method cannot schedule this problem (e.g. 'zb-v' without V placement, or over the memory limit)."""


class InvalidScheduleError(RuntimeError):
    """A method produced a schedule that breaks the problem's rules: a bug, never user error."""
