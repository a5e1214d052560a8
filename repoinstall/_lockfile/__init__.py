"""Lock files: what exactly a ``pylock.toml`` (PEP 751) or a fully hashed requirements file installs in this
environment. A pure reader: it installs nothing and asks no index.

- :mod:`.request`: a ``-r`` file as a request: a lock's tree (its pins, named for its closure) or its lines;
- :mod:`.read`: ``read_lock(path)`` and ``is_lock_file(path)``, the entry points (with an in-process cache);
- :mod:`.hashed`: hashed requirements files (``name==version --hash=...``): pip's ``--require-hashes`` rules;
- :mod:`.pylock`: a PEP 751 file checked and narrowed to this environment's packages and artifacts;
- :mod:`.local`: which artifacts a lock may name: local files below its directory or a find-links one, URLs
  pip and uv read as meant;
- :mod:`.environment`: the interpreter a lock is read for (markers, Python version, wheel tags);
- :mod:`.filenames`: wheel and sdist file names;
- :mod:`.model`: the answer, :class:`~.model.Lock` of :class:`~.model.LockedPackage`, and its key.
"""
