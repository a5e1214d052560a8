"""A Python whose bytecode compile shows its history in reference counts, as some interpreters' do.

CPython's marshal flags an object for back-references when its reference count is above 1, and sorts a set's
elements by their marshal bytes, flag included. In free-threaded builds and later versions those counts follow what
the interpreter compiled before (interned strings, small ints, constants shared with earlier code); in the 3.11
build the tests run on they hardly do. This interpreter makes them: it is this Python, but in the compile loop
(``python -I -c <script>``) marshal.dumps holds a reference to each constant of a code object equal to one of code
it marshalled before, while it writes it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

#: Run before the compile loop's script, in each compiling interpreter.
SHARING = """
import marshal as _marshal, types as _types
_dumps, _seen = _marshal.dumps, set()
def _constants(root):
    stack = [root]
    while stack:
        item = stack.pop()
        if isinstance(item, _types.CodeType):
            stack.extend(item.co_consts)
        elif isinstance(item, (str, bytes, float, int, tuple, frozenset)):
            yield item
            if isinstance(item, (tuple, frozenset)):
                stack.extend(item)
def _sharing_dumps(value, *args):
    held = [x for x in _constants(value) if (type(x), x) in _seen]  # equal to constants compiled here before
    data = _dumps(value, *args)
    _seen.update((type(x), x) for x in _constants(value))
    del held
    return data
_marshal.dumps = _sharing_dumps
"""


def sharing_python(directory: Path) -> Path:
    """Write that interpreter (a shell script running this Python) into ``directory``; its path."""
    (directory / "sharing.py").write_text(SHARING)
    wrapper = directory / "python"
    wrapper.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = -I ] && [ "$2" = -c ]; then\n'
        f'  script=$3; shift 3; exec {sys.executable} -I -c "$(cat {directory}/sharing.py)\n$script" "$@"\n'
        "fi\n"
        f'exec {sys.executable} "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


@contextmanager
def one_core() -> Iterator[None]:
    """This thread (and the threads it starts) on one core: the bytecode compile starts one interpreter."""
    cores = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(cores)})
    try:
        yield
    finally:
        os.sched_setaffinity(0, cores)
