"""The store of distributions: each installed distribution once per repo, trees composed from it by hard links.

Work in progress for issue "Each distribution once" (not wired into the install protocol yet):

- :mod:`.identity`: a stored distribution's identity (environment, name, version, artifact sha256) and path;
- :mod:`.split`: one installer run's ``--target`` dir split into one dir per distribution, by their RECORDs;
- :mod:`.compose`: a tree made of stored distributions, file by file hard links (a copy where the filesystem
  refuses them), refusing two distributions that write one path;
- :mod:`.store`: presence, check and no-replace publish of a stored distribution;
- :mod:`.inventory`: every stored distribution's dir, and the trees whose records name each one;
- :mod:`.audit`: a stored distribution checked against its RECORD (every hash: verify's; sizes only: the install
  path's guard before it links one into a tree), and a damaged one set aside whole into trash/.

Wired so far: pinned installs (locks, kept closures) install only what the store lacks and compose the tree;
whole installs move their distributions into the store when every artifact's hash is known; verify checks every
stored distribution too, naming the trees composed from it (a file changed in place there is changed in each of
them: one inode), and ``--repair`` sets a damaged one aside before reinstalling those trees, so it is installed
afresh with new inodes. Still to do for the issue: a lock per distribution (``LockKey`` from ``_store.lockkey``,
under its own top, not ``locks/<env>``, so tree-lock readers never see it), with the protocol's wait/takeover;
one resolution and one installer run per batch (``Repo.ensure_all`` learns every closure first: the lock's lines,
a kept closure, or ``pip install --dry-run --report`` / ``uv pip compile``); gc of unreferenced distributions (a
tree's record lists its dists); doctor and ``list --json`` figures; the read-only directories question (gc must
still take trees apart; another UID's files are refused links under ``fs.protected_hardlinks``: copied); the
fault suites (SIGKILL/SIGSTOP at each store step, disk full, two UIDs, FUSE, sshfs, the NFS guest, a chaos round
over the store) and the benchmarks of the issue.
"""
