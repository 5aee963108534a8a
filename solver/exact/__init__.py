"""Exact methods: the CP-SAT model (:mod:`.cpsat`) and the ILP (:mod:`.ilp`)."""
