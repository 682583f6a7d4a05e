"""Data: in-memory arrays (`arrays`), their loaders (`synthetic`, `npz`, `parquet`, `volumes`,
`load`), random crops (`crops`), and the Ray Data pipeline that feeds the workers (`pipeline`,
`shard_cache`).

Layer: imports only `trainables.config` and `trainables.status`; the models and the loop import
from here, never the other way.
"""

from trainables.data.arrays import ArrayData, DataError, DataMeta, from_arrays, hold_out

__all__ = ["ArrayData", "DataError", "DataMeta", "from_arrays", "hold_out"]
