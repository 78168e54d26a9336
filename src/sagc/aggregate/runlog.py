"""Read the records of a W&B run file without the W&B service (docs/aggregation.md, "Reading W&B run files")."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

from wandb.proto import wandb_internal_pb2 as pb

from sagc.aggregate.errors import CorruptRunFileError

HEADER = struct.Struct("<4sHB")
HEADER_IDENT = b":W&B"
HEADER_MAGIC = 0xBEE1
HEADER_VERSION = 0

BLOCK_SIZE = 32 * 1024
CHUNK_HEADER = struct.Struct("<IHB")

FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4

# CRC-32 of each chunk-type byte: the seed of that chunk's payload checksum.
_TYPE_CRC = {t: zlib.crc32(bytes([t])) for t in (FULL, FIRST, MIDDLE, LAST)}


@dataclass
class RunLog:
    """The parsed records of one run file, in file order."""

    path: Path
    records: list = field(default_factory=list)
    #: True when the file ended inside a record (a killed writer): that record is lost.
    truncated_tail: bool = False


def _payloads(path: Path, data: bytes) -> tuple[list[bytes], bool]:
    """Split the log into record payloads; returns (payloads, truncated_tail)."""
    if len(data) < HEADER.size:
        raise CorruptRunFileError(path, f"file is {len(data)} bytes, shorter than the header")
    ident, magic, version = HEADER.unpack_from(data, 0)
    if ident != HEADER_IDENT or magic != HEADER_MAGIC or version != HEADER_VERSION:
        raise CorruptRunFileError(
            path,
            f"not a wandb 0.31 run file (header {ident!r} magic {magic:#x} version {version})",
        )
    payloads: list[bytes] = []
    pending: list[bytes] | None = None  # chunks of a record that spans blocks
    pos = HEADER.size
    while pos < len(data):
        left_in_block = BLOCK_SIZE - pos % BLOCK_SIZE
        if left_in_block < CHUNK_HEADER.size:
            pos += left_in_block  # block trailer: zero padding
            continue
        if pos + CHUNK_HEADER.size > len(data):
            return payloads, True  # killed while writing a chunk header
        crc, length, ctype = CHUNK_HEADER.unpack_from(data, pos)
        if ctype == 0 and length == 0 and crc == 0:
            # Zero padding (a preallocated or padded block): skip to the next block.
            if not any(data[pos : pos + left_in_block]):
                pos += left_in_block
                continue
            raise CorruptRunFileError(path, f"zero chunk header followed by data at byte {pos}")
        start = pos + CHUNK_HEADER.size
        end = start + length
        if length > left_in_block - CHUNK_HEADER.size:
            raise CorruptRunFileError(path, f"chunk at byte {pos} overruns its 32 KiB block")
        if end > len(data):
            return payloads, True  # killed while writing a payload
        payload = data[start:end]
        if ctype not in _TYPE_CRC:
            raise CorruptRunFileError(path, f"unknown chunk type {ctype} at byte {pos}")
        if zlib.crc32(payload, _TYPE_CRC[ctype]) != crc:
            raise CorruptRunFileError(path, f"checksum mismatch in the chunk at byte {pos}")
        if ctype in (FULL, FIRST):
            if pending is not None:
                raise CorruptRunFileError(path, f"record interrupted at byte {pos}")
            pending = [payload]
        elif pending is None:
            raise CorruptRunFileError(path, f"continuation chunk without a start at byte {pos}")
        else:
            pending.append(payload)
        if ctype in (FULL, LAST):
            payloads.append(b"".join(pending))
            pending = None
        pos = end
    return payloads, pending is not None


def read_run_log(path: str | Path) -> RunLog:
    """Parse every record of the run file; ``CorruptRunFileError`` for anything not a readable wandb 0.31 log."""
    path = Path(path)
    data = path.read_bytes()
    payloads, truncated = _payloads(path, data)
    log = RunLog(path=path, truncated_tail=truncated)
    for i, payload in enumerate(payloads):
        record = pb.Record()
        try:
            record.ParseFromString(payload)
        except Exception as exc:  # protobuf's DecodeError and friends
            raise CorruptRunFileError(path, f"record {i} is not a wandb Record: {exc}") from exc
        log.records.append(record)
    # No record at all is a run killed before its first flush: empty, not corrupt.
    if log.records and log.records[0].WhichOneof("record_type") != "header":
        raise CorruptRunFileError(path, "the first record is not a wandb header record")
    return log
