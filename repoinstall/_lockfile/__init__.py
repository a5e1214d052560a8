"""Lock files: what exactly a ``pylock.toml`` (PEP 751) or a fully hashed requirements file installs in this
environment. A pure reader: it installs nothing and asks no index.

- :mod:`.read`: ``read_lock(path)`` and ``is_lock_file(path)``, the entry points (with an in-process cache);
- :mod:`.hashed`: hashed requirements files (``name==version --hash=...``): pip's ``--require-hashes`` rules;
- :mod:`.pylock`: a PEP 751 file checked and narrowed to this environment's packages and artifacts;
- :mod:`.environment`: the interpreter a lock is read for (markers, Python version, wheel tags);
- :mod:`.filenames`: wheel and sdist file names;
- :mod:`.model`: the answer, :class:`~.model.Lock` of :class:`~.model.LockedPackage`, and its key.
"""
