"""Hostile one-record runs written byte by byte (no protobuf package needed): TFRecord framing
with real CRC-32C lengths, smdebug's legacy payload checksum, an Event/Summary/TensorProto
encoded by hand, and the index file pointing at it."""

import json
import struct
from pathlib import Path
from typing import Optional, Sequence

# TensorFlow's DataType numbers.
DT_FLOAT, DT_UINT8, DT_BOOL, DT_HALF = 1, 4, 10, 19

_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def _crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = _CRC_TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def _masked(crc: int) -> int:
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def _varint(n: int) -> bytes:
    out = bytearray()
    n &= (1 << 64) - 1
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _varint_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def tensor_proto(dtype: int, dims: Sequence[int], content: bytes = b"", fill: Optional[int] = None) -> bytes:
    """A TensorProto: ``content`` raw, or one typed fill value (``int_val``, ``bool_val`` or
    ``half_val`` by dtype) that readers repeat over the shape."""
    shape = b"".join(_field(2, _varint_field(1, d)) for d in dims)
    out = _varint_field(1, dtype) + _field(2, shape)
    if content:
        out += _field(4, content)
    if fill is not None:
        number = {DT_BOOL: 11, DT_HALF: 13}.get(dtype, 7)
        out += _varint_field(number, fill)
    return out


def record(payload: bytes) -> bytes:
    """One TFRecord: length, its masked CRC-32C, the payload, smdebug's legacy payload CRC."""
    length = struct.pack("<Q", len(payload))
    return length + struct.pack("<I", _masked(_crc32c(length))) + payload + struct.pack("<I", 0x062DC0B3)


def one_record_run(root: Path, name: str, tensor: bytes) -> Path:
    """``root/run``: step 0 of worker_0 holding one record, tensor ``name`` (TRAIN step 0)."""
    value = _field(1, name.encode()) + _field(8, tensor)
    event = struct.pack("<Bd", 0x09, 1.0) + _varint_field(2, 0) + _field(5, _field(1, value))
    rec = record(event)
    run = root / "run"
    event_file = "events/000000000000/000000000000_worker_0.tfevents"
    (run / event_file).parent.mkdir(parents=True)
    (run / event_file).write_bytes(rec)
    index = run / "index/000000000/000000000000_worker_0.json"
    index.parent.mkdir(parents=True)
    index.write_text(
        json.dumps(
            {
                "meta": {"mode": "TRAIN", "mode_step": 0, "event_file_name": event_file},
                "tensor_payload": [{"tensorname": name, "start_idx": 0, "length": len(rec)}],
                "shape_payload": [],
            }
        )
    )
    return run


def long_run(root: Path, steps: int, names: Sequence[str]) -> Path:
    """``root/run``: ``steps`` TRAIN steps of worker_0, each an event file holding one float32
    record per name (4 values, from the step and the name's place), the index files smdebug
    writes for them and the end marker."""
    run = root / "run"
    for step in range(steps):
        event_file = f"events/{step:012}/{step:012}_worker_0.tfevents"
        data, entries = b"", []
        for i, name in enumerate(names):
            values = struct.pack("<4f", *(step + i + k / 4 for k in range(4)))
            tensor = tensor_proto(DT_FLOAT, [4], content=values)
            value = _field(1, name.encode()) + _field(8, tensor)
            event = struct.pack("<Bd", 0x09, 1.0 + step) + _varint_field(2, step) + _field(5, _field(1, value))
            rec = record(event)
            entries.append({"tensorname": name, "start_idx": len(data), "length": len(rec)})
            data += rec
        (run / event_file).parent.mkdir(parents=True)
        (run / event_file).write_bytes(data)
        index = run / f"index/{step // 1000:09}/{step:012}_worker_0.json"
        index.parent.mkdir(parents=True, exist_ok=True)
        meta = {"mode": "TRAIN", "mode_step": step, "event_file_name": event_file}
        index.write_text(json.dumps({"meta": meta, "tensor_payload": entries, "shape_payload": []}))
    (run / "training_job_end.ts").write_text("")
    return run
