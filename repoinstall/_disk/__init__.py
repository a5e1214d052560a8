"""The repo on disk: its layout, descriptor-relative file access, tree identity, manifest entries and the lock-free
check (the locks in it are :mod:`repoinstall._lock`'s). Imports nothing above it but the package's plain values."""
