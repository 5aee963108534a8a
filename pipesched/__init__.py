"""pipesched: optimal pipeline-parallel schedules (solver), a service (api) and a torch runtime."""

__version__ = "0.1.0"
