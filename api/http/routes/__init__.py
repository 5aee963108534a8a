"""One router per resource: solve, plan, jobs, schedules, ops (health, metrics, methods)."""
