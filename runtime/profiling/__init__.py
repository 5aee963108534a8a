"""Measuring what a schedule costs on this machine: stage and layer profiles, the link, contention
between ranks, the work after a step's last op, and splits priced from whole-stage profiles."""
