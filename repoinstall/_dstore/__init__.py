"""The store of distributions: each installed distribution once per repo, trees composed from it by hard links.

Work in progress for issue "Each distribution once" (not wired into the install protocol yet):

- :mod:`.identity`: a stored distribution's identity (environment, name, version, artifact sha256) and path;
- :mod:`.split`: one installer run's ``--target`` dir split into one dir per distribution, by their RECORDs;
- :mod:`.compose`: a tree made of stored distributions, file by file hard links (a copy where the filesystem
  refuses them), refusing two distributions that write one path.
"""
