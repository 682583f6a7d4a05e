"""3D volumes for segmentation: deterministic synthetic organelles and a user's `.npy` folder.

Training volumes are cut into cubic chunks (the Ray Data rows); trials then take random
`patch_size` crops of those chunks. Validation keeps whole volumes for sliding-window inference.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import numpy as np

from trainables.data.arrays import ArrayData, DataError
from trainables.data.synthetic import cache_dir

CHUNK = 32  # side of the training chunks: the largest patch a 3D trial may ask for
MIN_SIDE = 16  # volumes with a side under CHUNK are cut into MIN_SIDE chunks; none may be smaller


def synthetic_volume(size: int, rng: np.random.Generator, n_objects: int | None = None):
    """Bright ellipsoid 'organelles' with a brighter membrane shell, plus unlabelled distractor
    blobs and noise (like mitochondria in EM). Returns (image float32, mask uint8), (D, H, W).

    40 objects by default; volumes under 48^3 get 40 per 48^3 (at least 3), else objects of
    radius 4-9 would fill them."""
    if n_objects is None:
        n_objects = 40 if size >= 48 else max(3, round(40 * (size / 48) ** 3))
    grid = np.stack(np.meshgrid(*([np.arange(size)] * 3), indexing="ij"), -1).astype(np.float32)
    image = rng.normal(0.0, 0.35, (size, size, size)).astype(np.float32)
    mask = np.zeros((size, size, size), np.uint8)
    for k in range(n_objects):
        center = rng.uniform(4, size - 4, 3)
        radii = rng.uniform(4, 9, 3)
        # Only the object's bounding box can change: every voxel it touches has r < 1.1, so
        # |x - center| < 1.1 * radii on each axis. The same values as over the whole volume,
        # in a few percent of the time (the first command generates this data: 3.2 -> 0.14 s).
        box = tuple(slice(max(0, int(np.floor(c - 1.1 * a))),
                          min(size, int(np.ceil(c + 1.1 * a)) + 1)) for c, a in zip(center, radii))
        r = np.sqrt((((grid[box] - center) / radii) ** 2).sum(-1))
        if k % 3 == 2:  # a distractor: a dimmer solid blob with no membrane, not labelled
            image[box] += 0.6 * (r < 1.0)
            continue
        inside = r < 0.8
        membrane = (r >= 0.8) & (r < 1.1)
        image[box] += 0.5 * inside + 1.2 * membrane
        mask[box] |= inside.astype(np.uint8)
    return image, mask


def chunks(volume: np.ndarray, size: int = CHUNK, stride: int | None = None) -> np.ndarray:
    """Overlapping (stride = size/2) cubic chunks of a (D, H, W) volume, as (N, 1, s, s, s)."""
    stride = stride or size // 2
    d, h, w = volume.shape
    out = [volume[i : i + size, j : j + size, k : k + size]
           for i in range(0, d - size + 1, stride)
           for j in range(0, h - size + 1, stride)
           for k in range(0, w - size + 1, stride)]
    return np.stack(out)[:, None]


def volumes_to_data(train: list[tuple[np.ndarray, np.ndarray]],
                    val: list[tuple[np.ndarray, np.ndarray]], source: str,
                    chunk: int = CHUNK) -> ArrayData:
    """Training volumes cut into half-overlapping `chunk`-sided cubes, MIN_SIDE-sided when a
    volume is smaller than `chunk`; validation volumes kept whole."""
    if min(min(img.shape) for img, _ in train) < chunk:
        chunk = MIN_SIDE
    x = np.concatenate([chunks(img, chunk) for img, _ in train]).astype(np.float32)
    y = np.concatenate([chunks(lab, chunk) for _, lab in train]).astype(np.int64)
    # Validation volumes must share one shape to stack; crop them to the smallest common shape.
    shape = np.min([img.shape for img, _ in val], axis=0)
    crop = tuple(slice(0, s) for s in shape)
    x_val = np.stack([img[crop] for img, _ in val])[:, None].astype(np.float32)
    y_val = np.stack([lab[crop] for _, lab in val])[:, None].astype(np.int64)
    num_classes = int(max(y.max(), y_val.max())) + 1
    return ArrayData(x, y, x_val, y_val, max(num_classes, 2), source=source)


def synthetic_volumes(n_train: int = 4, n_val: int = 1, size: int = 64, seed: int = 77,
                      chunk: int = CHUNK) -> ArrayData:
    """The built-in set: `n_train` + `n_val` volumes of `size`^3 (64: 108 training chunks of
    32^3 and one 64^3 validation volume; a 2-epoch trial reaches Dice ~0.2-0.9 on a CPU)."""
    rng = np.random.default_rng(seed)
    train = [synthetic_volume(size, rng) for _ in range(n_train)]
    val = [synthetic_volume(size, rng) for _ in range(n_val)]
    return volumes_to_data(train, val, source="synthetic-volumes", chunk=chunk)


def cached_synthetic_volumes(**params) -> ArrayData:
    key = hashlib.sha1(repr(sorted(params.items())).encode()).hexdigest()[:12]
    path = cache_dir() / f"volumes-{key}.npz"
    if path.exists():
        with np.load(path, allow_pickle=False) as f:
            return ArrayData(f["x"], f["y"], f["x_val"], f["y_val"], int(f["num_classes"]),
                             source="synthetic-volumes")
    data = synthetic_volumes(**params)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp.npz")
    np.savez(tmp, x=data.x_train, y=data.y_train, x_val=data.x_val, y_val=data.y_val,
             num_classes=data.num_classes)
    os.replace(tmp, path)
    return data


def load_volume_folder(path: str | os.PathLike, val_count: int = 1) -> ArrayData:
    """A folder with `images/NAME.npy` (D, H, W) volumes and `labels/NAME.npy` integer masks of
    the same shape. The last `val_count` volumes (sorted by name) are held out unless the folder
    has `val/images` and `val/labels`. Files are read with allow_pickle=False."""
    root = Path(path)
    if not (root / "images").is_dir() or not (root / "labels").is_dir():
        raise DataError(f"{root}: a volume folder needs 'images/' and 'labels/' subfolders of "
                        ".npy files with matching names")

    def read_pairs(folder: Path) -> list[tuple[np.ndarray, np.ndarray]]:
        pairs = []
        for img_path in sorted((folder / "images").glob("*.npy")):
            lab_path = folder / "labels" / img_path.name
            if not lab_path.is_file():
                raise DataError(f"{img_path}: no label volume {lab_path}")
            try:
                img = np.load(img_path, allow_pickle=False)
                lab = np.load(lab_path, allow_pickle=False)
            except ValueError as err:
                raise DataError(f"{img_path} or {lab_path} is not a plain .npy array ({err})")
            if img.ndim != 3 or lab.shape != img.shape:
                raise DataError(f"{img_path}: image {img.shape} and label {lab.shape} must be "
                                "the same (D, H, W) shape")
            if min(img.shape) < MIN_SIDE:
                raise DataError(f"{img_path}: every side must be >= {MIN_SIDE} (got {img.shape})")
            if not np.issubdtype(lab.dtype, np.integer) or lab.min() < 0:
                raise DataError(f"{lab_path}: labels must be non-negative integers")
            if not np.isfinite(img).all():
                raise DataError(f"{img_path}: contains NaN or inf")
            pairs.append((img.astype(np.float32), lab.astype(np.int64)))
        return pairs

    pairs = read_pairs(root)
    if (root / "val" / "images").is_dir():
        train, val = pairs, read_pairs(root / "val")
    else:
        if len(pairs) <= val_count:
            raise DataError(f"{root}: {len(pairs)} volume(s) are too few to hold out "
                            f"{val_count} for validation; add volumes or a val/ folder")
        train, val = pairs[:-val_count], pairs[-val_count:]
    if not train or not val:
        raise DataError(f"{root}: no .npy volumes found under images/")
    return volumes_to_data(train, val, source=str(root))
