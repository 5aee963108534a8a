"""Puts ``tests/`` on ``sys.path`` (pytest does so for a conftest's folder), so every test folder can
``from requires import require`` (tests/requires.py: optional packages, skipped locally, required in CI)."""
