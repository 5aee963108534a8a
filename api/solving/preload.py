"""Imported by the solver forkserver only: loads every method before the first fork."""

from .worker import warm

warm()
