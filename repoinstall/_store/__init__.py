"""The repo on disk: its layout, descriptor-relative file access, tree identity, manifest entries, the lock-free
check, and the per-name locks in it. Imports nothing above it but the package's plain values."""
