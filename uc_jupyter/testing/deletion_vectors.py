"""Delete rows of a Delta table with a deletion vector, the way Delta writers do (deltalake cannot).

For tests: the rows stay in the Parquet file and only the Delta log says they are gone, which is
exactly what readers must honour. Writes one commit that upgrades the protocol to the
``deletionVectors`` feature and replaces the file's ``add`` action with one carrying an inline
deletion vector (a RoaringBitmapArray, Z85-encoded, as the Delta protocol specifies).

Example:
    >>> delete_with_deletion_vector("/data/t", {0: [2, 5]})  # rows 2 and 5 of the first file  # doctest: +SKIP
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from pathlib import Path

__all__ = ["delete_with_deletion_vector"]

_MAGIC = 1681511377  # the Delta deletion vector format's magic number
_ROARING_NO_RUNS = 12346  # the portable RoaringBitmap cookie without run containers
_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def delete_with_deletion_vector(table_path: str | Path, rows_by_file: Mapping[int, Sequence[int]]) -> int:
    """Mark ``rows_by_file[i]`` (row positions) of the table's ``i``-th data file deleted; return
    the new version. The table must have one commit per add (as written by deltalake)."""
    log = Path(table_path) / "_delta_log"
    commits = sorted(log.glob("*.json"))
    adds = [json.loads(line)["add"] for c in commits for line in c.read_text().splitlines() if '"add"' in line]
    version = len(commits)
    stamp = max(a["modificationTime"] for a in adds) + 1
    actions: list[dict[str, object]] = [
        {
            "protocol": {
                "minReaderVersion": 3,
                "minWriterVersion": 7,
                "readerFeatures": ["deletionVectors"],
                "writerFeatures": ["deletionVectors"],
            }
        }
    ]
    for index, rows in rows_by_file.items():
        add = adds[index]
        serialized = _serialize(sorted(set(rows)))
        vector = {
            "storageType": "i",
            "pathOrInlineDv": _z85(serialized),
            "sizeInBytes": len(serialized),
            "cardinality": len(set(rows)),
        }
        actions.append(
            {
                "remove": {
                    "path": add["path"],
                    "deletionTimestamp": stamp,
                    "dataChange": True,
                    "extendedFileMetadata": True,
                    "partitionValues": add.get("partitionValues", {}),
                    "size": add["size"],
                }
            }
        )
        actions.append({"add": {**add, "dataChange": True, "deletionVector": vector, "modificationTime": stamp}})
    actions.append({"commitInfo": {"timestamp": stamp, "operation": "DELETE"}})
    target = log / f"{version:020d}.json"
    tmp = log / f".{target.name}.tmp"
    tmp.write_text("".join(json.dumps(a) + "\n" for a in actions))
    tmp.rename(target)
    return version


def _serialize(rows: Sequence[int]) -> bytes:
    """Magic number, then a RoaringBitmapArray of one 32-bit bitmap of array containers."""
    if any(r < 0 or r >= 1 << 32 for r in rows):
        raise ValueError("row positions must fit 32 bits")
    containers: dict[int, list[int]] = {}
    for r in rows:
        containers.setdefault(r >> 16, []).append(r & 0xFFFF)
    header = struct.pack("<ii", _ROARING_NO_RUNS, len(containers))
    header += b"".join(struct.pack("<HH", key, len(vals) - 1) for key, vals in sorted(containers.items()))
    offset = len(header) + 4 * len(containers)
    offsets, bodies = b"", b""
    for _key, vals in sorted(containers.items()):
        offsets += struct.pack("<I", offset + len(bodies))
        bodies += b"".join(struct.pack("<H", v) for v in vals)
    bitmap = header + offsets + bodies
    return struct.pack("<I", _MAGIC) + struct.pack("<q", 1) + struct.pack("<I", 0) + bitmap


def _z85(data: bytes) -> str:
    data += b"\0" * (-len(data) % 4)
    out: list[str] = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i : i + 4], "big")
        digits = []
        for _ in range(5):
            digits.append(_Z85[value % 85])
            value //= 85
        out.extend(reversed(digits))
    return "".join(out)
