"""The store of distributions: each installed distribution once per repo, trees composed from it by hard links.

- :mod:`.identity`: a stored distribution's identity (environment, name, version, artifact sha256), path and lock;
- :mod:`.split`: one installer run's ``--target`` dir split into one dir per distribution, by their RECORDs;
- :mod:`.compose`: a tree made of stored distributions, file by file hard links (a copy where the filesystem
  refuses them), refusing two distributions that write one path;
- :mod:`.store`: presence, check and no-replace publish of a stored distribution;
- :mod:`.requires`: which of a resolved set of distributions one tree holds, by their ``Requires-Dist``;
- :mod:`.inventory`: every stored distribution's dir, and the trees whose records name each one;
- :mod:`.audit`: a stored distribution checked against its RECORD (verify's, and the install path's before it
  links one into a tree), and a damaged one set aside whole into trash/;
- :mod:`.held`: which stored distributions the trees' records name (gc keeps them);
- :mod:`.usage`: the store's figures (distributions, bytes, bytes hard links save) for ``list --json``, ``doctor``;
- :mod:`.links`: whether the repo's filesystem takes hard links (``doctor``).

Installing into the store (one resolution and one installer run per batch, a lock per distribution) is
``repoinstall._install.fill`` (a batch's trees, a single tree, and the steps both take); gc of the store is
``repoinstall._ops.gcstore``.
"""
