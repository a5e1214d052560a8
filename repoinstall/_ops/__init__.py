"""Operator commands on a repo: verify and repair, gc, lock info, doctor. Each takes a ``Layout``."""
