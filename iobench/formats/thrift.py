"""The little of Thrift's compact protocol a Parquet footer and page header need: structs of
i32, i64, binary, nested structs and lists (the encoding Parquet's ``parquet.thrift`` objects
are stored in; spec: thrift/doc/specs/thrift-compact-protocol.md)."""

from __future__ import annotations

from collections.abc import Sequence

_I32, _I64, _BINARY, _LIST, _STRUCT = 5, 6, 8, 9, 12


class Struct(bytes):
    """An encoded struct (its fields and the stop byte), to nest in another or in a list."""


#: A field's value: int (i32), ("i64", int), str/bytes (binary), Struct, or a list of one kind.
Value = int | tuple | str | bytes | Struct | list


def varint(n: int) -> bytes:
    """Unsigned LEB128."""
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def zigzag(n: int) -> bytes:
    """A signed integer as the compact protocol writes it (zigzag, then varint)."""
    return varint((n << 1) ^ (n >> 63))


def i64(n: int) -> tuple[str, int]:
    """Marks ``n`` as an i64 field (a plain int is an i32)."""
    return ("i64", n)


def _kind_and_body(value: Value) -> tuple[int, bytes]:
    if isinstance(value, Struct):
        return _STRUCT, bytes(value)
    if isinstance(value, tuple):
        return _I64, zigzag(int(value[1]))
    if isinstance(value, int):
        if not -(2**31) <= value < 2**31:
            raise ValueError(f"{value} does not fit a Thrift i32")
        return _I32, zigzag(value)
    if isinstance(value, (str, bytes)):
        raw = value.encode() if isinstance(value, str) else value
        return _BINARY, varint(len(raw)) + raw
    if isinstance(value, list):
        return _LIST, _list(value)
    raise TypeError(f"no Thrift encoding for {type(value).__name__}")


def _list(items: Sequence[Value]) -> bytes:
    if not items:
        return bytes([_I32])  # an empty list of i32: the element type is then moot
    kinds = {_kind_and_body(v)[0] for v in items}
    if len(kinds) != 1:
        raise TypeError("a Thrift list holds one kind of element")
    kind = kinds.pop()
    head = bytes([(len(items) << 4) | kind]) if len(items) < 15 else bytes([0xF0 | kind])
    size = b"" if len(items) < 15 else varint(len(items))
    return head + size + b"".join(_kind_and_body(v)[1] for v in items)


def struct(*fields: tuple[int, Value | None]) -> Struct:
    """A struct of (field id, value) in increasing id order; a None value is left out."""
    out = bytearray()
    last = 0
    for fid, value in fields:
        if value is None:
            continue
        if fid <= last:
            raise ValueError("Thrift struct fields go in increasing id order")
        kind, body = _kind_and_body(value)
        delta = fid - last
        if delta <= 15:
            out.append((delta << 4) | kind)
        else:
            out.append(kind)
            out += zigzag(fid)
        out += body
        last = fid
    out.append(0)
    return Struct(bytes(out))
