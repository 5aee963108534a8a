"""Times for a per-device order (simulate, re-time), the validator, and finalize: the library's one exit."""
