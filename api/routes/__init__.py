"""One router per resource: solve, jobs, schedules, ops (health, metrics, methods)."""
