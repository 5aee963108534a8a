"""Time limits shared by the runtime tests (a uniquely named module: every test folder has a conftest)."""

#: Upper bound for one spawned group (start-up ~3 s per process on a loaded 2-core machine).
GROUP_TIMEOUT_S = 90.0
