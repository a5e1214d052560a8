"""Asking a package index: resolution of unpinned specs, sources, the simple API, wheel metadata, HTTP and the
answers cached on the volume."""
