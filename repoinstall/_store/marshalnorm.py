"""A code object's marshal bytes, with FLAG_REF kept only where a later TYPE_REF refers back to the object, each
set's elements in the order of their values, and equal frozensets one object.

CPython's marshal writer sets FLAG_REF (0x80 on an object's type byte: "add me to the reference list") on every
object whose reference count is above 1 in the writing interpreter, whether or not the stream refers to it again
(CPython issue #98819). That count depends on what else lives in the interpreter: the strings and numbers that
other code compiled there holds, the interpreter's build (free-threaded builds count references differently). So
one source compiled in two interpreters can give two pycs that differ in these bits and in the reference indexes
that follow them, though they load the same code. A set's elements (a frozenset constant: ``x in {"a b", 1.5}``)
move too: marshal sorts them by their own marshal bytes, FLAG_REF included.

:func:`normalize` parses the stream (every type code CPython 3.11 to 3.14 writes or reads in a code object), finds
which reference slots a TYPE_REF uses, clears FLAG_REF on all the others and renumbers the references to the slots
kept, as Fedora's add-determinism does for the pycs it packages. Where a set is there, it writes the stream anew
(see :func:`_rewrite`): each set's elements sorted by their values, and equal frozensets one object, as whether
CPython's compiler made them one depends on its history too. Otherwise nothing changes: the bytes keep their
length, and load the same objects, shared the same way. Normalising normalised bytes changes nothing.

This module imports nothing but the standard library: the compiling interpreters (the tree's, which may be another
Python than repoinstall's) run its source as it is (see ``bytecode.py``).
"""

import struct
import sys

FLAG_REF = 0x80
#: Type codes whose object takes a reference slot when flagged (marshal.c's R_REF and r_ref_reserve): every one
#: but the singletons (None, True, False, StopIteration, Ellipsis, NULL) and TYPE_REF itself.
_NULL, _REF = ord("0"), ord("r")
_SINGLETONS = frozenset(b"NFTS.0")
#: Leaves of a fixed size after the type byte: TYPE_INT, TYPE_INT64, TYPE_BINARY_FLOAT, TYPE_BINARY_COMPLEX.
_FIXED = {ord("i"): 4, ord("I"): 8, ord("g"): 8, ord("y"): 16}
#: Leaves of a 4-byte size then that many bytes: TYPE_STRING (bytes), TYPE_INTERNED, TYPE_UNICODE, TYPE_ASCII,
#: TYPE_ASCII_INTERNED.
_SIZED = frozenset(b"stuaA")
#: Leaves of a 1-byte size then that many bytes: TYPE_SHORT_ASCII, TYPE_SHORT_ASCII_INTERNED, TYPE_FLOAT (text).
_SHORT = frozenset(b"zZf")
_COMPLEX_TEXT, _LONG = ord("x"), ord("l")
#: Containers of a 4-byte count then that many objects: TYPE_TUPLE, TYPE_LIST, TYPE_SET, TYPE_FROZENSET.
_COUNTED = frozenset(b"([<>")
_SETS, _FROZENSET = frozenset(b"<>"), ord(">")
_SMALL_TUPLE, _DICT, _CODE, _SLICE = ord(")"), ord("{"), ord("c"), ord(":")

#: A code object after its type byte (marshal.c's w_complex_object, 3.11 to 3.14): five 4-byte ints (argcount,
#: posonlyargcount, kwonlyargcount, stacksize, flags), eight objects (code, consts, names, localsplusnames,
#: localspluskinds, filename, name, qualname), a 4-byte int (firstlineno), two objects (linetable,
#: exceptiontable).
_CODE_HEAD, _CODE_OBJECTS, _CODE_MIDDLE, _CODE_TAIL = 20, 8, 4, 2

# What an open container still expects, on the scan's stack.
_ITEMS, _DICT_ITEMS, _CODE_FIRST, _CODE_LAST = 0, 1, 2, 3

_INT32 = struct.Struct("<i")
_UINT32 = struct.Struct("<I")


def normalize(data: bytes) -> bytes:
    """``data``, the marshal bytes of one object (a pyc after its 16-byte header), with FLAG_REF only on the
    objects a TYPE_REF refers to and the references renumbered to match; ValueError if it is not one whole
    marshalled object."""
    try:
        flagged, refs, sets = _scan(data)
        if sets:
            return _rewrite(data)
    except (IndexError, struct.error) as error:  # read past the end
        raise ValueError("marshal data ends inside an object") from error
    used = sorted({index for _, index in refs})
    if len(used) == len(flagged):
        return data  # every slot is referred to: normal already
    out = bytearray(data)
    keep = set(used)
    for index, position in enumerate(flagged):
        if index not in keep:
            out[position] &= ~FLAG_REF & 0xFF
    renumbered = {old: new for new, old in enumerate(used)}
    for position, index in refs:
        _UINT32.pack_into(out, position, renumbered[index])
    return bytes(out)


def _scan(data: bytes) -> tuple[list[int], list[tuple[int, int]], bool]:  # noqa: PLR0915 - one loop, a branch a type
    """The position of each flagged type byte, in the order marshal numbers their slots (the order the objects
    begin in the stream), each TYPE_REF's (position of its index, index), and whether a set is there (see
    :func:`_rewrite`)."""
    sets = False
    flagged: list[int] = []
    refs: list[tuple[int, int]] = []
    size = len(data)
    int32, uint32 = _INT32.unpack_from, _UINT32.unpack_from
    flag, refer = flagged.append, refs.append
    # Each open container: what it expects (one of _ITEMS...) and how many objects it still waits for (a dict:
    # how many it has read, to know whether a key or a value comes next).
    kinds: list[int] = []
    counts: list[int] = []
    position = 0
    while True:
        if position >= size:
            raise ValueError("marshal data ends inside an object")
        code = data[position]
        kind = code & 0x7F
        position += 1
        opened = False
        if kind == _REF:
            if code & FLAG_REF:
                raise ValueError("a flagged reference")
            index = uint32(data, position)[0]
            if index >= len(flagged):
                raise ValueError(f"a reference to slot {index} of {len(flagged)}")
            refer((position, index))
            position += 4
        else:
            if code & FLAG_REF:
                if kind in _SINGLETONS:
                    raise ValueError("a flagged singleton")
                flag(position - 1)
            # The commonest first: names and short strings, bytes (bytecode, line tables), small tuples.
            if kind in _SHORT:
                position += 1 + data[position]
            elif kind in _SIZED:
                length = int32(data, position)[0]
                if length < 0:
                    raise ValueError("a negative size")
                position += 4 + length
            elif kind == _SMALL_TUPLE:
                count = data[position]
                position += 1
                # Its items that are names and references (most of a code object's tuples), read here at once.
                while count:
                    item = data[position]
                    if item == _REF:
                        index = uint32(data, position + 1)[0]
                        if index >= len(flagged):
                            raise ValueError(f"a reference to slot {index} of {len(flagged)}")
                        refer((position + 1, index))
                        position += 5
                    elif item & 0x7F in _SHORT:
                        if item & FLAG_REF:
                            flag(position)
                        position += 2 + data[position + 1]
                    else:
                        break
                    count -= 1
                if count:
                    kinds.append(_ITEMS)
                    counts.append(count)
                    opened = True
            elif kind in _FIXED:
                position += _FIXED[kind]
            elif kind in _SINGLETONS:
                if kind == _NULL:
                    raise ValueError("a NULL object")
            elif kind == _CODE:
                position += _CODE_HEAD
                kinds.append(_CODE_FIRST)
                counts.append(_CODE_OBJECTS)
                opened = True
            elif kind in _COUNTED:
                count = int32(data, position)[0]
                position += 4
                if count < 0:
                    raise ValueError("a negative size")
                if count > 1 and kind in _SETS:
                    sets = True
                if count:
                    kinds.append(_ITEMS)
                    counts.append(count)
                    opened = True
            elif kind == _DICT:
                kinds.append(_DICT_ITEMS)
                counts.append(0)
                opened = True
            elif kind == _LONG:
                digits = int32(data, position)[0]
                position += 4 + 2 * abs(digits)
            elif kind == _COMPLEX_TEXT:
                position += 1 + data[position]
                position += 1 + data[position]
            elif kind == _SLICE:  # 3.14: start, stop, step
                kinds.append(_ITEMS)
                counts.append(3)
                opened = True
            else:
                raise ValueError(f"unknown marshal type {code:#04x} at {position - 1}")
        if opened:
            continue
        # One object ended: count it in the containers it ends, innermost first.
        while kinds:
            if kinds[-1] == _DICT_ITEMS:  # keys and values, up to a NULL where a key would be
                counts[-1] += 1
                if counts[-1] % 2 or data[position] != _NULL:
                    break
                position += 1
                kinds.pop()
                counts.pop()
                continue
            counts[-1] -= 1
            if counts[-1]:
                break
            if kinds[-1] == _CODE_FIRST:  # firstlineno, then the last two objects
                position += _CODE_MIDDLE
                kinds[-1] = _CODE_LAST
                counts[-1] = _CODE_TAIL
                break
            kinds.pop()
            counts.pop()
        else:
            if position != size:
                raise ValueError(f"{size - position} bytes after the marshalled object")
            return flagged, refs, sets
        if position > size:
            raise ValueError("marshal data ends inside an object")


class _Node:
    """One object of a marshal stream: its type code, the bytes after it up to its first item (or all of them),
    its items (a code object's: the eight, then ``middle``, its firstlineno, then the last two), how many times
    the stream holds it (once, and once more for each TYPE_REF to it)."""

    __slots__ = ("head", "items", "key", "kind", "middle", "start", "uses")

    def __init__(self, kind: int, head: bytes, start: int) -> None:
        self.kind = kind
        self.start = start  # where its type byte is
        self.head = head
        self.items: list[_Node] = []
        self.middle = b""
        self.uses = 1
        self.key: bytes | None = None


def _rewrite(data: bytes) -> bytes:
    """``data`` written again with each set's elements in one order, that of their values, and equal frozensets
    one object.

    Marshal writes a set's elements sorted by each one's own marshal bytes, FLAG_REF included, so their order too
    depends on reference counts. Reordering moves the objects defined inside the elements (and a TYPE_REF may
    then come before what it names), so here the stream is read into its graph of objects and written anew as
    marshal would with exact counts: each object inline where it first comes, flagged if the stream holds it
    again, a TYPE_REF wherever it comes again, the references numbered in order. Without a set this gives what
    the patching in :func:`normalize` does."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 3 * _MAX_DEPTH))  # one frame per level: marshal nests 2000 at most
    try:
        root, end = _read(data, 0, [], {})
        if end != len(data):
            raise ValueError(f"{len(data) - end} bytes after the marshalled object")
        out = bytearray()
        _write(root, out, {})
        return bytes(out)
    finally:
        sys.setrecursionlimit(limit)


_MAX_DEPTH = 2000


def _read(data: bytes, position: int, slots: list[_Node], frozen: dict[bytes, _Node]) -> tuple[_Node, int]:
    """The object at ``position`` and where it ends; ``slots``: the objects flagged so far, by reference index;
    ``frozen``: the frozensets read so far, by value."""
    code = data[position]
    kind = code & 0x7F
    position += 1
    if kind == _REF:
        index = _UINT32.unpack_from(data, position)[0]
        if code & FLAG_REF or index >= len(slots):
            raise ValueError(f"a reference to slot {index} of {len(slots)}")
        slots[index].uses += 1
        return slots[index], position + 4
    start = position
    position = _after_head(data, kind, position)
    if position > len(data):
        raise ValueError("marshal data ends inside an object")
    node = _Node(kind, data[start:position], start - 1)
    slot = -1
    if code & FLAG_REF:
        if kind in _SINGLETONS:
            raise ValueError("a flagged singleton")
        slot = len(slots)
        slots.append(node)  # before its items, as marshal numbers them
    if kind == _SMALL_TUPLE:
        count = data[start]
    elif kind in _COUNTED:
        count = _INT32.unpack_from(data, start)[0]
        if count < 0:
            raise ValueError("a negative size")
    elif kind == _CODE:
        count = _CODE_OBJECTS
    elif kind == _SLICE:
        count = 3
    elif kind == _DICT:
        while data[position] != _NULL:
            for _ in range(2):
                item, position = _read(data, position, slots, frozen)
                node.items.append(item)
        return node, position + 1
    else:
        return node, position
    for _ in range(count):
        item, position = _read(data, position, slots, frozen)
        node.items.append(item)
    if kind == _CODE:
        node.middle = data[position : position + _CODE_MIDDLE]
        position += _CODE_MIDDLE
        for _ in range(_CODE_TAIL):
            item, position = _read(data, position, slots, frozen)
            node.items.append(item)
    if kind in _SETS:
        node.items.sort(key=_key)
        if kind == _FROZENSET:
            return _merged(node, slot, position, slots, frozen), position
    return node, position


def _merged(node: _Node, slot: int, end: int, slots: list[_Node], frozen: dict[bytes, _Node]) -> _Node:
    """The frozenset ``node`` (its items read, up to ``end``; ``slot``: its reference index, or -1) or the equal
    one read before. Whether the compiler made two equal frozensets of one module one object depends on its
    history too (CPython 3.11 merges them or not, as numpy's, pandas' and scipy's pycs show); nothing can tell one
    from the other, they are immutable."""
    same = frozen.setdefault(_key(node), node)
    if same is not node:
        same.uses += node.uses
        if slot >= 0:
            slots[slot] = same  # a later TYPE_REF to it names the one kept
        _drop(node, node.start, end)
    return same


def _drop(node: _Node, start: int, end: int) -> None:
    """Count out what ``node``, a frozenset at ``start:end`` that another one replaces, held: each of its items
    once, and what each item it defined there held in turn."""
    for item in node.items:
        item.uses -= 1
        if start <= item.start < end:
            _drop(item, start, end)


def _after_head(data: bytes, kind: int, position: int) -> int:
    """Where the bytes of an object of type ``kind`` that follow its type byte at ``position - 1`` end: all its
    bytes for a leaf, its count (a code object's first five ints) for a container."""
    if kind in _SHORT:
        return position + 1 + data[position]
    if kind in _SIZED:
        length: int = _INT32.unpack_from(data, position)[0]
        return position + 4 + length
    if kind in _FIXED:
        return position + _FIXED[kind]
    if kind == _LONG:
        digits: int = _INT32.unpack_from(data, position)[0]
        return position + 4 + 2 * abs(digits)
    if kind == _COMPLEX_TEXT:
        position += 1 + data[position]
        return position + 1 + data[position]
    if kind == _SMALL_TUPLE:
        return position + 1
    if kind in _COUNTED:
        return position + 4
    if kind == _CODE:
        return position + _CODE_HEAD
    if (kind not in _SINGLETONS and kind not in (_DICT, _SLICE)) or kind == _NULL:
        raise ValueError(f"unknown marshal type {kind:#04x} at {position - 1}")
    return position


def _key(node: _Node) -> bytes:
    """What orders a set's elements: the object's value as marshal writes it with no FLAG_REF and no TYPE_REF."""
    if node.key is None:
        parts = [bytes((node.kind,)), node.head]
        for number, item in enumerate(node.items):
            if node.kind == _CODE and number == _CODE_OBJECTS:
                parts.append(node.middle)
            parts.append(_key(item))
        if node.kind == _DICT:
            parts.append(b"0")
        node.key = b"".join(parts)
    return node.key


def _write(node: _Node, out: bytearray, written: dict[int, int]) -> None:
    """Append ``node`` to ``out``: inline the first time (flagged if the stream holds it again), then a TYPE_REF
    to its index in ``written`` (each flagged object's, by id, in the order written)."""
    if node.uses > 1 and id(node) in written:
        out.append(_REF)
        out += _UINT32.pack(written[id(node)])
        return
    if node.uses > 1:
        written[id(node)] = len(written)
        out.append(node.kind | FLAG_REF)
    else:
        out.append(node.kind)
    out += node.head
    for number, item in enumerate(node.items):
        if node.kind == _CODE and number == _CODE_OBJECTS:
            out += node.middle
        _write(item, out, written)
    if node.kind == _DICT:
        out.append(_NULL)
