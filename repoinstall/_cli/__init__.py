"""The ``repoinstall`` command line: commands, the option set they share, progress on a terminal."""
