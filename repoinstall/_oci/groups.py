"""Which distributions of a tree share a layer of its image: one layer each, unless that passes :data:`CAP`.

Overlay-based runtimes stack an image's layers as the lower directories of one overlay mount, and refuse past
a depth: Docker's overlay2 at 125 layers, podman's (containers/storage) at 128 ("max depth exceeded"). A tree of
a few hundred distributions, one layer each, could not be mounted. So a tree of more than :data:`CAP`
distributions is pushed in at most :data:`CAP` layers:

- every distribution of more than :data:`BIG` bytes of files keeps a layer of its own, byte-identical to the one
  it has in any other tree's image (numpy, pandas, torch...: the bytes worth sharing on a registry and a node);
- the others, sorted by name, are cut into runs of the fewest distributions each that keeps the image within
  the cap (every run of the same length but the last).

The grouping depends on nothing but the tree's distributions (their names and sizes): the same tree gives the
same layers, and so the same digests, from any repo, whatever order its distributions were installed in. A tree
of at most :data:`CAP` distributions keeps one layer per distribution, as before grouping existed.
"""

from __future__ import annotations

from collections.abc import Mapping

#: The most layers an image of a tree has: well under Docker's 125 and podman's 128, leaving room for images
#: built on top of a tree's (``FROM``), which add layers of their own.
CAP = 100
#: A distribution with more bytes of files than this keeps a layer of its own in a grouped image: 5 MiB, above
#: nearly every pure-Python library, below the compiled ones that trees share (numpy's files take about 40 MB).
BIG = 5 << 20


def grouped(sizes: Mapping[str, int], cap: int = CAP, big: int = BIG) -> list[tuple[str, ...]]:
    """The layers of a tree's image, each the canonical names of the distributions it holds (``sizes``: each
    distribution's bytes of files, by its canonical name), in order of their first name; at most ``cap``."""
    names = sorted(sizes)
    if len(names) <= cap:
        return [(name,) for name in names]
    # Alone: the distributions above ``big``, at most cap - 1 of them (the largest; one layer is left for the rest).
    alone = sorted((name for name in names if sizes[name] > big), key=lambda name: (-sizes[name], name))[: cap - 1]
    kept = set(alone)
    rest = [name for name in names if name not in kept]
    # len(rest) > cap - len(alone) here, so each run holds at least two.
    run = -(-len(rest) // (cap - len(alone)))
    runs = [tuple(rest[start : start + run]) for start in range(0, len(rest), run)]
    return sorted([(name,) for name in alone] + runs)
