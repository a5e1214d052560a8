"""A code object's marshal bytes, with FLAG_REF kept only where a later TYPE_REF refers back to the object.

CPython's marshal writer sets FLAG_REF (0x80 on an object's type byte: "add me to the reference list") on every
object whose reference count is above 1 in the writing interpreter, whether or not the stream refers to it again
(CPython issue #98819). That count depends on what else lives in the interpreter: the strings and numbers that
other code compiled there holds, the interpreter's build (free-threaded builds count references differently). So
one source compiled in two interpreters can give two pycs that differ in these bits and in the reference indexes
that follow them, though they load the same code.

:func:`normalize` parses the stream (every type code CPython 3.11 to 3.14 writes or reads in a code object), finds
which reference slots a TYPE_REF uses, clears FLAG_REF on all the others and renumbers the references to the slots
kept, as Fedora's add-determinism does for the pycs it packages. Nothing else changes: the bytes keep their length,
and load the same objects, shared the same way. Normalising normalised bytes changes nothing.

This module imports nothing but the standard library: the compiling interpreters (the tree's, which may be another
Python than repoinstall's) run its source as it is (see ``bytecode.py``).
"""

import struct

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
        flagged, refs = _scan(data)
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


def _scan(data: bytes) -> tuple[list[int], list[tuple[int, int]]]:  # noqa: PLR0915 - one loop, one branch a type
    """The position of each flagged type byte, in the order marshal numbers their slots (the order the objects
    begin in the stream), and each TYPE_REF's (position of its index, index)."""
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
        if kinds and kinds[-1] == _DICT_ITEMS and counts[-1] % 2 == 0 and data[position] == _NULL:
            position += 1  # the NULL that ends a dict, where its next key would be
            kinds.pop()
            counts.pop()
        else:
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
            if kinds[-1] == _DICT_ITEMS:
                counts[-1] += 1
                break
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
            return flagged, refs
        if position > size:
            raise ValueError("marshal data ends inside an object")
