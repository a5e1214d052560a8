"""The lock on the shared volume, one per lockable thing (a tree, a stored distribution, an index cache entry).

- :mod:`.key`: what one lock guards (:class:`~.key.LockKey`; a tree's is :func:`~.key.tree_key`);
- :mod:`.taken`: what asking for a lock came to (:class:`~.taken.Taken`), and why none can be had here
  (:class:`~.taken.Unusable`);
- :mod:`.wait`: how a waiter waits (the strategy, on an injectable clock);
- :mod:`.filelock_rw`: filelock's soft read-write lock, the one module that imports filelock or knows its on-disk
  state;
- :mod:`.soft`: one lock as a holder and a waiter use it, with its owner note;
- :mod:`.obstacles`: why no lock can be had here, found before anyone waits;
- :mod:`.locks`: the locks of one repo as one process takes them (``TreeLocks.hold``), and gc's take-and-run;
- :mod:`.state`: a lock's files and what they say, as values, for those that read locks without taking them (lock
  info, gc, doctor, the index cache): nothing outside this package names a lock's file.

The lock only saves duplicate work: the rename that publishes a tree is the commit point. It sits above the disk
layer (``repoinstall._disk``) and below everything that installs or operates on a repo.
"""
