"""MNIST for the training page: a chain of sources, first that works wins.

Returns plain numpy arrays and says where they came from. No TensorFlow here: Keras's own
download is a step the worker passes in (`tapeviz.worker.keras_download`).
"""
from __future__ import annotations

import gzip
import io
import os
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np

ENV_DIR = "TAPEVIZ_MNIST_DIR"
KERAS_CACHE = Path("~/.keras/datasets/mnist.npz")
NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")
IDX_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
# IDX type codes (third magic byte) that MNIST-like files use.
IDX_DTYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


@dataclass
class Digits:
    """Images float32 in [0, 1], shape (N, H, W, 1); labels int64 in 0..9.

    `train` is None when the source only has one set (the 10k MNIST test files,
    sklearn's digits): `split` then carves the held-out digits out of `test`.
    """

    test_images: np.ndarray
    test_labels: np.ndarray
    source: str
    train_images: Optional[np.ndarray] = None
    train_labels: Optional[np.ndarray] = None
    notes: list = field(default_factory=list)   # why earlier sources in the chain were passed over

    @property
    def has_train(self) -> bool:
        return self.train_images is not None


# --- parsing ------------------------------------------------------------------------------


def read_idx(path) -> np.ndarray:
    """Parse one IDX file (gzip or plain): magic 0,0,type,ndim; big-endian dims; data."""
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            raw = f.read()
    except (OSError, EOFError) as e:  # gzip.BadGzipFile is an OSError
        raise ValueError(f"{path.name}: cannot read ({e})") from e
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] not in IDX_DTYPES:
        raise ValueError(f"{path.name}: not an IDX file (bad magic number {raw[:4].hex()})")
    ndim = raw[3]
    header = 4 + 4 * ndim
    if ndim == 0 or len(raw) < header:
        raise ValueError(f"{path.name}: truncated IDX header")
    dims = tuple(int(d) for d in np.frombuffer(raw, ">u4", count=ndim, offset=4))
    dtype = np.dtype(IDX_DTYPES[raw[2]])
    expected = int(np.prod(dims)) * dtype.itemsize
    if len(raw) - header != expected:
        raise ValueError(
            f"{path.name}: IDX header says {dims} ({expected} bytes) but {len(raw) - header} bytes follow"
        )
    return np.frombuffer(raw, dtype, offset=header).reshape(dims)


def to_digits_arrays(images, labels, what: str):
    """Validate raw images/labels and convert: float32 (N, H, W, 1) in [0, 1], int64 labels."""
    images = np.asarray(images)
    labels = np.asarray(labels).reshape(-1)
    if images.ndim == 4 and images.shape[-1] == 1:
        images = images[..., 0]
    if images.ndim != 3:
        raise ValueError(f"{what}: images must be (N, H, W), got shape {images.shape}")
    if len(images) != len(labels):
        raise ValueError(f"{what}: {len(images)} images but {len(labels)} labels")
    if len(labels) == 0:
        raise ValueError(f"{what}: no digits")
    if not np.issubdtype(labels.dtype, np.integer) or labels.min() < 0 or labels.max() > 9:
        raise ValueError(f"{what}: labels must be integers 0..9")
    images = images.astype(np.float32)
    top = float(images.max())
    if top > 1.0:  # 8-bit pixels, as MNIST stores them
        images /= 255.0 if top <= 255.0 else top
    return images[..., None], labels.astype(np.int64)


def _find(directory: Path, stem: str) -> Optional[Path]:
    for name in (stem + ".gz", stem):
        if (directory / name).is_file():
            return directory / name
    return None


def load_idx_dir(directory) -> Digits:
    """The four MNIST IDX files, or only the two t10k ones, from one directory."""
    directory = Path(directory)
    sets = {}
    for split, (image_stem, label_stem) in IDX_FILES.items():
        image_path, label_path = _find(directory, image_stem), _find(directory, label_stem)
        if image_path and label_path:
            sets[split] = to_digits_arrays(read_idx(image_path), read_idx(label_path), image_path.name)
    if "test" not in sets:
        raise FileNotFoundError(f"{directory}: no t10k-images-idx3-ubyte.gz / t10k-labels-idx1-ubyte.gz")
    which = "train + test" if "train" in sets else "test set only"
    digits = Digits(*sets["test"], source=f"MNIST IDX files ({which}) in {directory}")
    if "train" in sets:
        digits.train_images, digits.train_labels = sets["train"]
    return digits


# What an npz may unpack to: MNIST's own (70,000 uint8 digits of 28x28 and their labels) is
# 55 MB. Checked from the zip's directory and each array's .npy header before anything is
# decompressed: a few hundred KB of zipped zeros can otherwise ask for gigabytes.
NPZ_MAX_BYTES = 64 * 2**20
NPZ_MAX_SIDE = 64            # an image's height and width (MNIST 28, scikit-learn's digits 8)
NPZ_MAX_MEMBERS = 16


def check_npz(file) -> None:
    """ValueError("not an MNIST npz: ...") unless the archive's directory and its arrays'
    headers describe MNIST-like arrays (shapes, dtypes, sizes) within NPZ_MAX_BYTES. Reads
    only the directory and each header's first bytes."""
    try:
        with zipfile.ZipFile(file) as archive:
            members = archive.infolist()
            if len(members) > NPZ_MAX_MEMBERS:
                raise ValueError(f"not an MNIST npz: it holds {len(members):,} files")
            total = sum(m.file_size for m in members)
            if total > NPZ_MAX_BYTES:
                raise ValueError(
                    f"not an MNIST npz: it would unpack to {total / 2**20:,.0f} MiB, over the "
                    f"{NPZ_MAX_BYTES // 2**20} MiB an MNIST npz may take (MNIST's own, 70,000 "
                    f"uint8 digits of 28x28, is 55 MB)")
            found = {m.filename[:-len(".npy")]: m for m in members if m.filename.endswith(".npy")}
            for key in NPZ_KEYS:
                if key in found:
                    with archive.open(found[key]) as member:
                        _check_header(key, member, found[key].file_size)
    except (zipfile.BadZipFile, OSError, EOFError) as e:
        raise ValueError(f"not an MNIST npz: cannot read it ({e})") from e
    finally:
        if hasattr(file, "seek"):
            file.seek(0)             # np.load reads it next


def _check_header(key: str, member, size: int) -> None:
    """One array's .npy header against what MNIST holds, and against its member's size."""
    try:
        version = np.lib.format.read_magic(member)
        shape, fortran, dtype = (np.lib.format.read_array_header_1_0(member) if version == (1, 0)
                                 else np.lib.format.read_array_header_2_0(member))
    except ValueError as e:
        raise ValueError(f"not an MNIST npz: {key} is not a plain array ({e})") from e
    if dtype.hasobject or dtype.kind not in ("iu" if key.startswith("y") else "iuf") or dtype.itemsize > 8:
        raise ValueError(f"not an MNIST npz: {key} holds {dtype}, not numbers as MNIST's uint8")
    if key.startswith("x"):
        sides = shape[1:3] if len(shape) in (3, 4) else ()
        if len(shape) not in (3, 4) or (len(shape) == 4 and shape[3] != 1):
            raise ValueError(f"not an MNIST npz: {key}: images must be (N, H, W), got shape {shape}")
        if any(side > NPZ_MAX_SIDE for side in sides):
            raise ValueError(f"not an MNIST npz: {key}: images of {sides[0]}x{sides[1]}, larger "
                             f"than digits ({NPZ_MAX_SIDE}x{NPZ_MAX_SIDE} at most; MNIST's are 28x28)")
    nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if nbytes > size:
        raise ValueError(f"not an MNIST npz: {key}'s header says {nbytes:,} bytes, its file "
                         f"holds {size:,}")


def load_npz(file, source: str) -> Digits:
    """An mnist.npz as Keras stores it: x_train, y_train, x_test, y_test; checked from its
    directory and headers (check_npz) before any array is unpacked."""
    check_npz(file)
    try:
        archive = np.load(file, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as e:
        raise ValueError(f"not an MNIST npz: cannot read it ({e})") from e
    if not hasattr(archive, "files"):  # a bare .npy array, not an archive
        raise ValueError("not an MNIST npz: a single array, not an npz archive")
    with archive:
        missing = [k for k in NPZ_KEYS if k not in archive.files]
        if missing:
            raise ValueError(f"not an MNIST npz: missing arrays {missing} (has {sorted(archive.files)})")
        try:
            arrays = {k: archive[k] for k in NPZ_KEYS}
        except (ValueError, OSError, zipfile.BadZipFile) as e:
            raise ValueError(f"not an MNIST npz: cannot read its arrays ({e})") from e
    try:
        train = to_digits_arrays(arrays["x_train"], arrays["y_train"], "x_train")
        test = to_digits_arrays(arrays["x_test"], arrays["y_test"], "x_test")
    except ValueError as e:
        raise ValueError(f"not an MNIST npz: {e}") from e
    return Digits(*test, source=source, train_images=train[0], train_labels=train[1])


def load_npz_bytes(data: bytes) -> Digits:
    """An uploaded mnist.npz; raises ValueError("not an MNIST npz: ...") for anything else."""
    if not data:
        raise ValueError("not an MNIST npz: the upload is empty")
    if not data.startswith(b"PK"):  # every .npz is a zip archive
        raise ValueError(f"not an MNIST npz: not a zip archive (starts with {data[:8]!r})")
    return load_npz(io.BytesIO(data), source=f"uploaded mnist.npz ({len(data):,} bytes)")


def load_user_path(path) -> Digits:
    """A directory of IDX files or an mnist.npz, or a path straight to an .npz file."""
    path = Path(path).expanduser()
    if path.is_file():
        return load_npz(path, source=f"mnist.npz at {path}")
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such file or directory")
    if (path / "mnist.npz").is_file():
        return load_npz(path / "mnist.npz", source=f"mnist.npz in {path}")
    return load_idx_dir(path)


def load_keras_cache() -> Digits:
    cache = KERAS_CACHE.expanduser()  # expanded per call: $HOME may change (tests, workers)
    if not cache.is_file():
        raise FileNotFoundError(f"no Keras cache at {cache}")
    return load_npz(cache, source=f"Keras cache {cache}")


def load_sklearn_digits() -> Digits:
    """The offline fallback: scikit-learn's bundled 1,797 real 8x8 digits (pixels 0..16)."""
    from sklearn.datasets import load_digits

    bunch = load_digits()
    images, labels = to_digits_arrays(bunch.images / 16.0, bunch.target, "sklearn digits")
    return Digits(images, labels, source="scikit-learn's 8x8 digits (1,797, offline fallback; not MNIST)")


# --- the chain ----------------------------------------------------------------------------


def load_mnist(data_dir=None, upload: Optional[bytes] = None,
               download: Optional[Callable[[], Digits]] = None) -> Digits:
    """Try, in order: the user's path (argument, else $TAPEVIZ_MNIST_DIR), the Keras cache,
    Keras's download, an uploaded npz, scikit-learn's digits. The first that works wins;
    `notes` on the result says why each earlier one was passed over.

    `download` is Keras's download step; it imports TensorFlow, so only a worker passes it.
    """
    user_path = data_dir or os.environ.get(ENV_DIR)
    steps = []
    if user_path:
        steps.append((f"path {user_path}", lambda: load_user_path(user_path)))
    steps.append(("Keras cache", load_keras_cache))
    if download:
        steps.append(("Keras download", download))
    if upload:
        steps.append(("uploaded npz", lambda: load_npz_bytes(upload)))
    notes = []
    for name, step in steps:
        try:
            digits = step()
        except Exception as e:  # noqa: BLE001 - any failure means: try the next source
            notes.append(f"{name}: {type(e).__name__}: {e}")
            continue
        digits.notes = notes
        return digits
    digits = load_sklearn_digits()
    digits.notes = notes
    return digits


# --- train / held-out ---------------------------------------------------------------------


def split(digits: Digits, held_out: float = 0.2, limit: Optional[int] = None):
    """(x_train, y_train, x_test, y_test).

    With separate train and test sets, the test set is the held-out set. With one set
    (the 10k MNIST test files), the first (1 - held_out) train and the rest are held out:
    8,000 / 2,000. `limit` caps the digits used in all, split in the same proportion.
    """
    if digits.has_train:
        x_train, y_train = digits.train_images, digits.train_labels
        x_test, y_test = digits.test_images, digits.test_labels
    else:
        n_test = max(1, int(round(len(digits.test_labels) * held_out)))
        cut = len(digits.test_labels) - n_test
        x_train, y_train = digits.test_images[:cut], digits.test_labels[:cut]
        x_test, y_test = digits.test_images[cut:], digits.test_labels[cut:]
    if limit is not None:
        n_test = min(len(y_test), max(1, int(round(limit * held_out))))
        n_train = min(len(y_train), max(1, limit - n_test))
        x_train, y_train = x_train[:n_train], y_train[:n_train]
        x_test, y_test = x_test[:n_test], y_test[:n_test]
    return x_train, y_train, x_test, y_test
