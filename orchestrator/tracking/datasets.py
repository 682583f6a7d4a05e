"""The search's data as MLflow records it with `log_input`: name, source, digest and shape.

The digest is a sha256 of the file for a file source (what a user can check with `sha256sum`),
else of the arrays themselves (synthetic or in-memory data). Every run of a search carries the
same record, so the UI's Dataset column shows that every trial saw the same data.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from orchestrator.tracking.steps import DatasetRecord
from trainables.data.arrays import ArrayData


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _array_digest(data: ArrayData) -> str:
    h = hashlib.sha256()
    for array in (data.x_train, data.y_train, data.x_val, data.y_val):
        h.update(str((array.dtype.str, array.shape)).encode())  # same bytes, other shape: differ
        h.update(memoryview(array.reshape(-1)).cast("B") if array.flags.c_contiguous
                 else array.tobytes())
    return h.hexdigest()


def dataset_record(data: ArrayData) -> DatasetRecord:
    path = Path(data.source)
    if path.is_file():
        digest = _file_digest(path)
        source_type, source = "local", {"uri": path.resolve().as_uri()}
        name = path.name
    else:
        digest = _array_digest(data)
        source_type, source = "code", {"generator": data.source}
        name = path.name if path.is_dir() else data.source
    profile = {"train_shape": list(data.x_train.shape), "val_shape": list(data.x_val.shape),
               "train_labels_shape": list(data.y_train.shape), "num_classes": data.num_classes,
               "sha256": digest}
    # MLflow shows the digest in the UI's Dataset column; it holds up to 36 characters.
    return DatasetRecord(name=name, digest=digest[:16], source_type=source_type,
                         source=json.dumps(source), profile=json.dumps(profile))
