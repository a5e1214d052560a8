"""A code object's marshal bytes normalised: FLAG_REF only where a TYPE_REF refers back, so the bytes no longer
depend on the reference counts of the interpreter that wrote them, and load the same objects, shared the same way."""

from __future__ import annotations

import cmath
import glob
import marshal
import os
import struct
import subprocess
import sys
import textwrap
import types
from collections.abc import Iterator
from typing import Any

import pytest

from repoinstall._store.marshalnorm import normalize

#: Standard library sources, a fixed sample: a few hundred modules of every kind.
LIBRARY = sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "*.py")))[:150]


def graph(root: object) -> Iterator[object]:
    """Every object marshal writes for ``root``, in the order it writes them (shared ones again each time)."""
    stack = [root]
    while stack:
        item = stack.pop()
        yield item
        if isinstance(item, types.CodeType):
            fields = [item.co_code, item.co_consts, item.co_names, item.co_varnames, item.co_filename, item.co_name,
                      item.co_qualname, item.co_linetable, item.co_exceptiontable]  # fmt: skip
            stack.extend(reversed(fields))
        elif isinstance(item, frozenset | set):
            stack.extend(sorted(item, key=repr, reverse=True))  # one order, whatever the hash table's
        elif isinstance(item, tuple | list):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            stack.extend(reversed([x for pair in item.items() for x in pair]))


def same(left: object, right: object) -> bool:
    """Whether ``left`` and ``right`` are the same values (NaNs and signed zeros too, by their bits), of the same
    types (strings interned or not alike)."""
    lefts, rights = list(graph(left)), list(graph(right))
    if len(lefts) != len(rights):
        return False
    for a, b in zip(lefts, rights, strict=True):
        if type(a) is not type(b):
            return False
        if isinstance(a, float) and isinstance(b, float):
            if struct.pack("<d", a) != struct.pack("<d", b):
                return False
        elif isinstance(a, complex) and isinstance(b, complex):
            if struct.pack("<dd", a.real, a.imag) != struct.pack("<dd", b.real, b.imag):
                return False
        elif isinstance(a, types.CodeType) and isinstance(b, types.CodeType):
            numbers = ("co_argcount", "co_posonlyargcount", "co_kwonlyargcount", "co_stacksize", "co_flags",
                       "co_firstlineno", "co_nlocals")  # fmt: skip
            if any(getattr(a, name) != getattr(b, name) for name in numbers):
                return False
        elif isinstance(a, str | bytes | int) and (a != b or _interned(a) != _interned(b)):
            return False
    return True


def dumps(value: Any) -> bytes:
    """marshal.dumps, for any value (the tests marshal what its stub cannot type)."""
    return marshal.dumps(value)


def _interned(value: object) -> bool:
    """Whether ``value`` is an interned string, as marshal sees it (sys.intern would intern it)."""
    return isinstance(value, str) and dumps(value)[0] & 0x7F in b"ZAt"


def held_dumps(code: object) -> bytes:
    """``code`` marshalled while every object it holds has one reference more, as when other code in the
    interpreter shares them: marshal flags each one."""
    held = list(graph(code))
    data = dumps(code)
    del held
    return data


def check(code: object) -> None:
    raw, held = dumps(code), held_dumps(code)
    normal = normalize(raw)
    assert normalize(held) == normal  # whatever the reference counts were
    assert normalize(normal) == normal  # normalised already: unchanged
    assert same(marshal.loads(normal), marshal.loads(raw))
    nan = any(isinstance(x, float | complex) and cmath.isnan(x) for x in graph(code))
    assert marshal.loads(normal) == code or nan  # equal to what was compiled (a NaN is equal to nothing)


def test_reference_counts_change_the_raw_bytes_never_the_normalised_ones() -> None:
    differ = 0
    for path in LIBRARY:
        with open(path, "rb") as handle:
            code = compile(handle.read(), path, "exec", dont_inherit=True)
        differ += dumps(code) != held_dumps(code)
        check(code)
    assert differ > len(LIBRARY) // 2  # the raw bytes do depend on them


def test_a_set_marshal_ordered_by_reference_counts_is_ordered_by_value() -> None:
    # Marshal sorts a set's elements by their own marshal bytes, FLAG_REF included: an interned string is always
    # flagged, another string only when shared, so the two come in either order.
    code = compile("def f(x):\n    return x in {'ab', 'a b'}, x in {('a b', 1.5), ('a b', 2.5), b'x'}\n", "f", "exec")
    assert dumps(code) != held_dumps(code)
    check(code)
    # An element refers to an object another element defines, and that one comes first after reordering.
    check(frozenset({("z", SHARED), ("a", SHARED)}))


#: Run by two interpreters: one fresh, one that compiled much other code first and keeps, of each source it then
#: compiles, a reference to every object equal to one of that other code (as interned strings, small ints and
#: constants shared with it are held); each prints its pycs' marshal bytes, raw and normalised.
HISTORY = textwrap.dedent(
    """
    import marshal, sys
    sys.path[:0] = [sys.argv[1]]
    from marshalnorm import normalize
    sources, busy = sys.argv[2:-1], sys.argv[-1] == "busy"
    {graph}
    seen, kept = set(), []
    if busy:
        import glob, os
        for path in sorted(glob.glob(os.path.join(os.path.dirname(os.__file__), "*", "*.py")))[:300]:
            try:
                code = compile(open(path, "rb").read(), path, "exec", dont_inherit=True)
            except SyntaxError:
                continue
            kept.append(code)
            seen.update((type(x), x) for x in graph(code) if isinstance(x, (str, bytes, int, float)))
    out = []
    for path in sources:
        code = compile(open(path, "rb").read(), path, "exec", dont_inherit=True)
        shared = [x for x in graph(code) if isinstance(x, (str, bytes, int, float)) and (type(x), x) in seen]
        raw = marshal.dumps(code)
        del shared
        out.append((raw, normalize(raw)))
    sys.stdout.buffer.write(marshal.dumps(out))
    """
)


def test_a_busy_interpreter_writes_other_raw_bytes_and_the_same_normalised_ones() -> None:
    import inspect

    import repoinstall._store.marshalnorm as module

    script = HISTORY.replace("{graph}", textwrap.indent(inspect.getsource(graph), "    ").strip())
    script = "import types\nfrom collections.abc import Iterator\n" + script
    sources = LIBRARY[::3]
    runs = []
    for mode in ("fresh", "busy"):
        done = subprocess.run(
            [sys.executable, "-I", "-W", "ignore", "-c", script, os.path.dirname(module.__file__), *sources, mode],
            capture_output=True, timeout=300, check=True, env={**os.environ, "PYTHONHASHSEED": "0"},
        )  # fmt: skip
        runs.append(marshal.loads(done.stdout))
    fresh, busy = runs
    assert sum(a[0] != b[0] for a, b in zip(fresh, busy, strict=True)) > len(sources) // 4
    assert [normal for _, normal in fresh] == [normal for _, normal in busy]
    for raw, normal in fresh:
        assert same(marshal.loads(normal), marshal.loads(raw))


#: Constants marshal writes in every way it can: each compiled as a module, and each also marshalled bare.
TRICKY = {
    "frozensets": "def f(x):\n    return x in {1, 2, 3}, x in {'a', 'b'}, x not in {b'x', 2.5, (1, 2), 'a b'}\n",
    "a frozenset twice": "def f(x):\n    return x in {'225', '226'}\ndef g(x):\n    return x in {'225', '226'}\n",
    "nested tuples": "T = ((1, (2, (3, ('deep', (4.5, None))))), ((), ((),)), (1, 2) * 3)\n",
    "bytes": "B = (b'', b'x', b'x' * 300, bytes(range(256)), b'same', b'same')\n",
    "floats": "F = (0.0, -0.0, 1.5, 1e308, -1e-308, float('inf'), 1e400, -1e400, 1e400 - 1e400)\n",
    "complex": "C = (1j, -0j, 1.5 + 2.5j, 1e400j, (1e400 - 1e400) * 1j)\n",
    "big ints": "I = (2**31 - 1, -2**31, 2**31, 2**63, -2**63 - 1, 2**200, -(3**150), 0, -1, 256, 257)\n",
    "singletons": "S = (None, ..., True, False, None, ..., True)\nE = StopIteration\n",
    "strings": "A = ('name', 'name', 'not an identifier', 'not an identifier', 'é', 'ünï', 'x' * 300, 'y' * 300, '')\n",
    "interned and not": "import sys\nX = sys.intern('a b')\nY = 'a b'\nZ = 'a_b'\nW = ('a_b', 'a b')\n",
    "code in code": textwrap.dedent(
        """
        class A:
            def m(self, a, /, b=(1, 2), *c, d=frozenset({1}), **e):
                def inner():
                    return lambda: (a, b, c, d, e, [x for x in c], {k: v for k, v in e.items()})
                return inner
            async def n(self):
                async with self as s:
                    yield [s async for s in self]
        def g():
            try:
                pass
            except* ValueError:
                x = 1.5, 'doc', b'doc'
            return x
        """
    ),
}
SHARED = ("shared", 1.5)
BARE = {
    "a dict": {"a": 1, 2: (3.5, b"x"), (1, 2): frozenset({"q"})},
    "a list and a set": [1, {2, 3}, [4, [5]], set(), frozenset()],
    "an object twice": (SHARED, [SHARED], {"k": SHARED}),
    "a big tuple": tuple(range(300)) + ("x",) * 300,
    "a slice": slice(1, None, "z") if sys.version_info >= (3, 14) else "no slices before 3.14",
}


@pytest.mark.parametrize("name", sorted(TRICKY))
def test_tricky_constants_load_the_same_and_normalise_once(name: str) -> None:
    code = compile(TRICKY[name], name, "exec", dont_inherit=True)
    check(code)


@pytest.mark.parametrize("name", sorted(BARE))
def test_any_marshalled_object_normalises_too(name: str) -> None:
    check(BARE[name])


def test_what_is_shared_stays_shared_and_equal_frozensets_become_one() -> None:
    twice = marshal.loads(normalize(dumps(BARE["an object twice"])))
    assert twice[0] is twice[1][0] is twice[2]["k"]
    # Two equal frozensets, as the compiler sometimes leaves them (numpy's, pandas' and scipy's pycs show it).
    two = (frozenset({"a b", 2.5, ("c d", 3)}), [frozenset({("c d", 3), 2.5, "a b"})], ("c d", 3))
    raw = dumps(two)
    assert marshal.loads(raw)[0] is not marshal.loads(raw)[1][0]
    loaded = marshal.loads(normalize(raw))
    assert loaded[0] is loaded[1][0] and loaded == two
    assert normalize(normalize(raw)) == normalize(raw) == normalize(dumps((two[0], [two[0]], two[2])))


@pytest.mark.parametrize(
    "data",
    [b"", b"\xa9", b"\xa9\x02\xda\x01a", b"\xa9\x01\xda\x01aextra", b"r\x00\x00\x00\x00", b"?", b"\xce"],
    ids=["empty", "truncated tuple", "missing item", "trailing bytes", "dangling reference", "unknown", "flagged None"],
)
def test_what_is_not_one_marshalled_object_is_refused(data: bytes) -> None:
    with pytest.raises(ValueError):
        normalize(data)
