"""Fill the store and compose trees: plan what the store lacks for a set of pins, store it (each distribution
under its own lock, in one installer run), compose each tree of the stored distributions by hard links.

One path for every caller: a batch's trees (:mod:`.batch`: one resolution and one run for all of them, before
their protocols compose them), a single tree (:mod:`.tree`: step 5 of the install protocol), and ``verify
--repair`` (its reinstall is the protocol's step 5 again: :func:`repoinstall._ops.repair.repair_tree`). Each step
is a module with one job:

- :mod:`.plan`: each pin's stored distribution, by its artifact's sha256 (what the store holds, what it lacks);
- :mod:`.store`: what the store lacks, locked per distribution in one order, installed in one run;
- :mod:`.publish`: an installer's run split by RECORD, each distribution checked and published by rename;
- :mod:`.compose`: a tree composed of stored distributions while gc may take from the store;
- :mod:`.tree`, :mod:`.batch`: the single tree's and the batch's way through these steps.
"""
