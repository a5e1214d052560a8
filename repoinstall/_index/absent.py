"""Pinned specs proven absent from every source, before an installer is started for each of them.

A batch whose resolution together failed installs its trees one by one, each with its own installer run, whose
error names what is wrong. For a pinned spec that no source has, that run only learns what one look at the
source's listing shows: a ``-r`` file of 10,000 such pins ran 10,000 installers, about two a second, with no
error line until the end. So each pinned tree the batch did not resolve is looked up first, one listing per
spec (through the index cache, a few at a time), and one that every source answered without it is failed here,
named at once, with no installer; a spec whose source could not be read is left to its install, as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from .. import _log
from .._errors import NotOnIndex

if TYPE_CHECKING:
    from .._requirements import Requested
    from .resolve import Resolver

#: Listings asked for at once: enough to hide the round trips, few enough for any index's rate limits.
LOOKUPS_AT_ONCE = 8
#: How many of the absent specs the early line names.
_NAMED = 10


def proven_absent(resolver: Resolver, specs: Sequence[Requested]) -> dict[int, NotOnIndex]:
    """Of ``specs`` (each pinned), those that no source lists, by position, each with the line saying so; and that
    early line, once, naming the first few."""
    from concurrent.futures import ThreadPoolExecutor

    if not specs:
        return {}
    with ThreadPoolExecutor(max_workers=min(LOOKUPS_AT_ONCE, len(specs)), thread_name_prefix="repoinstall") as pool:
        answers = list(pool.map(lambda one: resolver.resolve([one])[0], specs))
    absent = {index: answer for index, answer in enumerate(answers) if isinstance(answer, NotOnIndex)}
    if absent:
        names = [specs[index].text for index in sorted(absent)]
        more = f" and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
        _log.logger().warning(
            "%d of %d pinned specs are on no index, not installing them: %s%s",
            len(absent),
            len(specs),
            ", ".join(names[:_NAMED]),
            more,
        )
    return absent
