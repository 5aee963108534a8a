"""The solving processes: every solve runs in its own process, killed at its wall-clock deadline.

Why processes: a solver stuck in native code (CP-SAT, CBC) cannot be interrupted any other way
than by killing its process, and its crash cannot take the service (or a batch run) down with it.
Processes fork from a forkserver that has already imported every method (:mod:`.preload`), so a
fork costs milliseconds, not the seconds of importing OR-Tools and PuLP.

- :mod:`.jobs`: one job per distinct (problem key, method) in flight; identical requests join it;
  caps on running and queued solves (HTTP 429 beyond them);
- :mod:`.runner`: starts one solve process, waits for its answer or kills it at the deadline;
- :mod:`.worker`: what runs inside the process (one solve, the answer sent back through a pipe);
- :mod:`.preload`: imported by the forkserver only.
"""
