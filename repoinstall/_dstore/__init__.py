"""The store of distributions: each installed distribution once per repo, trees composed from it by hard links.

Work in progress for issue "Each distribution once" (not wired into the install protocol yet):

- :mod:`.identity`: a stored distribution's identity (environment, name, version, artifact sha256) and path;
- :mod:`.split`: one installer run's ``--target`` dir split into one dir per distribution, by their RECORDs;
- :mod:`.compose`: a tree made of stored distributions, file by file hard links (a copy where the filesystem
  refuses them), refusing two distributions that write one path;
- :mod:`.store`: presence, check and no-replace publish of a stored distribution;
- :mod:`.held`: which stored distributions the trees' records name (gc keeps them);
- :mod:`.usage`: the store's figures (distributions, bytes, bytes hard links save) for ``list --json``, ``doctor``;
- :mod:`.links`: whether the repo's filesystem takes hard links (``doctor``).

Wired so far: pinned installs (locks, kept closures) install only what the store lacks and compose the tree;
whole installs move their distributions into the store when every artifact's hash is known; gc removes a stored
distribution no tree holds (``_ops.gcstore``), and makes a read-only directory of its own UID writable as it
removes it; ``list --json`` and ``doctor`` show the figures. Still to do for the issue: a lock per distribution
taken by installers (``DistId.lock_key``, under ``store-locks/``, not ``locks/<env>``, so tree-lock readers never
see it; gc already takes it before removing), with the protocol's wait/takeover; one resolution and one installer
run per batch (``Repo.ensure_all`` learns every closure first: the lock's lines, a kept closure, or ``pip install
--dry-run --report`` / ``uv pip compile``); verify/repair of the store (a changed file reported for every tree
holding its inode; repair rebuilds the distribution with new inodes, recomposes those trees); another UID's files
are refused links under ``fs.protected_hardlinks`` (copied); the fault suites (SIGKILL/SIGSTOP at each store step,
disk full, two UIDs, FUSE, sshfs, the NFS guest, a chaos round over the store) and the benchmarks of the issue.
"""
