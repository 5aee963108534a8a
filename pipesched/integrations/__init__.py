"""Start-up paths for training frameworks: a trainer calls one function and gets its pipeline config.

:mod:`.torchtitan`: torchtitan's pipeline flags from a plan, and the start-up helper that asks the
service on rank 0 and broadcasts the plan to every rank.
"""
