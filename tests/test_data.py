"""The MNIST loading chain: each source, its order, and its refusals."""
import gzip
import io
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from tapeviz import data
from npz_bombs import zipped_zeros_npz

SHARED_MNIST = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "mnist"


def write_idx(path, array, type_code=0x08):
    header = bytes([0, 0, type_code, array.ndim]) + np.array(array.shape, ">u4").tobytes()
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def fake_digits(n, side=28, seed=0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, 256, (n, side, side), dtype=np.uint8), rng.integers(0, 10, n, dtype=np.uint8)


def write_idx_set(directory, stem_pair, n, seed=0):
    images, labels = fake_digits(n, seed=seed)
    write_idx(directory / f"{stem_pair[0]}.gz", images)
    write_idx(directory / f"{stem_pair[1]}.gz", labels)
    return images, labels


def npz_of(**arrays):
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def npz_bytes(n_train=12, n_test=6, **overrides):
    x_train, y_train = fake_digits(n_train, seed=1)
    x_test, y_test = fake_digits(n_test, seed=2)
    return npz_of(**{"x_train": x_train, "y_train": y_train, "x_test": x_test, "y_test": y_test, **overrides})


@pytest.fixture
def no_sources(tmp_path, monkeypatch):
    """Nothing in the chain works: no env path, an empty HOME, a download that fails at once."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv(data.ENV_DIR, raising=False)

    return home


def offline():
    raise OSError("network is unreachable (test)")


# --- IDX parsing --------------------------------------------------------------------------


def test_idx_round_trip_scales_pixels_and_adds_channel(tmp_path):
    images, labels = write_idx_set(tmp_path, data.IDX_FILES["test"], 5)
    digits = data.load_idx_dir(tmp_path)
    assert digits.test_images.shape == (5, 28, 28, 1)
    assert digits.test_images.dtype == np.float32 and digits.test_labels.dtype == np.int64
    np.testing.assert_allclose(digits.test_images[..., 0], images / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(digits.test_labels, labels)
    assert not digits.has_train and "test set only" in digits.source


def test_four_idx_files_give_train_and_test(tmp_path):
    write_idx_set(tmp_path, data.IDX_FILES["train"], 8, seed=3)
    write_idx_set(tmp_path, data.IDX_FILES["test"], 4, seed=4)
    digits = data.load_idx_dir(tmp_path)
    assert digits.has_train and len(digits.train_labels) == 8 and len(digits.test_labels) == 4
    x_train, _, x_test, _ = data.split(digits)
    assert len(x_train) == 8 and len(x_test) == 4  # the real test set is the held-out set


@pytest.mark.parametrize("raw, complaint", [
    (b"\x00\x00\x08", "bad magic"),
    (b"\x01\x02\x08\x03" + bytes(20), "bad magic"),
    (b"\x00\x00\x08\x03" + np.array([2, 28, 28], ">u4").tobytes() + bytes(100), "bytes follow"),
    (b"\x00\x00\x08\x03\x00\x00", "truncated"),
])
def test_corrupt_idx_is_refused_clearly(tmp_path, raw, complaint):
    path = tmp_path / "bad-idx3-ubyte.gz"
    with gzip.open(path, "wb") as f:
        f.write(raw)
    with pytest.raises(ValueError, match=complaint):
        data.read_idx(path)


def test_a_gz_that_is_not_gzip_is_refused(tmp_path):
    path = tmp_path / "t10k-images-idx3-ubyte.gz"
    path.write_bytes(b"this is not gzip")
    with pytest.raises(ValueError, match="cannot read"):
        data.read_idx(path)


def test_missing_test_files_are_reported(tmp_path):
    with pytest.raises(FileNotFoundError, match="t10k"):
        data.load_idx_dir(tmp_path)


# --- npz and upload -----------------------------------------------------------------------


def test_upload_of_a_real_npz_loads():
    digits = data.load_npz_bytes(npz_bytes())
    assert digits.has_train and digits.train_images.shape == (12, 28, 28, 1)
    assert digits.source.startswith("uploaded mnist.npz")


@pytest.mark.parametrize("upload", [
    b"",
    b"garbage, not an archive",
    b"PK\x03\x04 a broken zip",
    npz_of(pictures=np.zeros((2, 2))),
])
def test_garbage_upload_is_rejected(upload):
    with pytest.raises(ValueError, match="^not an MNIST npz: "):
        data.load_npz_bytes(upload)


def test_npz_with_bad_labels_or_shapes_is_rejected():
    with pytest.raises(ValueError, match="labels must be integers 0..9"):
        data.load_npz_bytes(npz_bytes(y_test=np.full(6, 42)))
    with pytest.raises(ValueError, match="6 images but 3 labels"):
        data.load_npz_bytes(npz_bytes(y_test=np.zeros(3, np.uint8)))
    with pytest.raises(ValueError, match="images must be"):
        data.load_npz_bytes(npz_bytes(x_train=np.zeros(12)))


def test_a_bare_npy_is_not_an_npz():
    buffer = io.BytesIO()
    np.save(buffer, np.zeros(3))
    with pytest.raises(ValueError, match="not an MNIST npz"):
        data.load_npz(io.BytesIO(buffer.getvalue()), source="test")


# --- the chain ----------------------------------------------------------------------------


def test_env_path_wins_over_keras_cache(tmp_path, no_sources, monkeypatch):
    cache = no_sources / ".keras" / "datasets"
    cache.mkdir(parents=True)
    (cache / "mnist.npz").write_bytes(npz_bytes(n_train=3))
    user = tmp_path / "mine"
    user.mkdir()
    write_idx_set(user, data.IDX_FILES["test"], 7)
    monkeypatch.setenv(data.ENV_DIR, str(user))
    digits = data.load_mnist()
    assert str(user) in digits.source and len(digits.test_labels) == 7


def test_explicit_argument_wins_over_env(tmp_path, no_sources, monkeypatch):
    env_dir, arg_dir = tmp_path / "env", tmp_path / "arg"
    for directory, n in ((env_dir, 3), (arg_dir, 9)):
        directory.mkdir()
        write_idx_set(directory, data.IDX_FILES["test"], n)
    monkeypatch.setenv(data.ENV_DIR, str(env_dir))
    assert len(data.load_mnist(arg_dir).test_labels) == 9


def test_user_path_may_hold_an_npz_or_be_one(tmp_path, no_sources):
    (tmp_path / "mnist.npz").write_bytes(npz_bytes())
    assert data.load_mnist(tmp_path).source.startswith("mnist.npz in")
    assert data.load_mnist(tmp_path / "mnist.npz").source.startswith("mnist.npz at")


def test_keras_cache_used_when_no_user_path(no_sources):
    cache = no_sources / ".keras" / "datasets"
    cache.mkdir(parents=True)
    (cache / "mnist.npz").write_bytes(npz_bytes())
    digits = data.load_mnist()
    assert digits.source.startswith("Keras cache") and digits.has_train


def test_keras_download_used_after_the_cache(no_sources, monkeypatch):
    downloaded = data.load_npz_bytes(npz_bytes())
    downloaded.source = "MNIST downloaded by Keras"
    assert data.load_mnist(download=lambda: downloaded).source == "MNIST downloaded by Keras"
    assert "scikit-learn" in data.load_mnist().source


def test_upload_used_when_offline(no_sources):
    digits = data.load_mnist(upload=npz_bytes(), download=offline)
    assert digits.source.startswith("uploaded")
    assert any("Keras download" in note for note in digits.notes)


def test_broken_user_path_falls_through_with_a_note(tmp_path, no_sources):
    (tmp_path / "mnist.npz").write_bytes(b"junk")
    digits = data.load_mnist(tmp_path, upload=npz_bytes())
    assert digits.source.startswith("uploaded")
    assert "not an MNIST npz" in digits.notes[0]


def test_sklearn_digits_when_nothing_else_works(no_sources):
    digits = data.load_mnist(upload=b"garbage", download=offline)
    assert "scikit-learn" in digits.source
    assert digits.test_images.shape == (1797, 8, 8, 1)
    assert 0.0 <= digits.test_images.min() and digits.test_images.max() == pytest.approx(1.0)
    assert len(digits.notes) == 3  # cache, download, upload each said why not
    x_train, _, x_test, _ = data.split(digits)
    assert len(x_train) + len(x_test) == 1797 and len(x_test) == 359


def test_the_real_download_gives_up_offline(tmp_path, monkeypatch):
    """Keras's own download with no route out must fail, not hang (skipped with a network)."""
    import socket

    try:
        socket.create_connection(("storage.googleapis.com", 443), timeout=2).close()
        pytest.skip("a network is reachable: this checks the offline path")
    except OSError:
        pass
    monkeypatch.setenv("HOME", str(tmp_path))  # keep Keras's cache writes out of the real home
    with pytest.raises(Exception, match="(?i)fetch|resolve|name|network|timed out"):
        from tapeviz.worker import keras_download

        keras_download.load(timeout=2.0)


# --- split --------------------------------------------------------------------------------


def test_split_limit_keeps_the_proportion():
    images, labels = data.to_digits_arrays(*fake_digits(100), "test")
    digits = data.Digits(images, labels, source="test")
    x_train, y_train, x_test, y_test = data.split(digits)
    assert (len(x_train), len(x_test)) == (80, 20)
    np.testing.assert_array_equal(y_test, labels[80:])  # held out from the end
    x_train, _, x_test, _ = data.split(digits, limit=50)
    assert (len(x_train), len(x_test)) == (40, 10)


# --- real digits and the import rule ------------------------------------------------------


def test_real_mnist_test_set():
    if not (SHARED_MNIST / "t10k-images-idx3-ubyte.gz").is_file():
        pytest.skip(f"the real MNIST test set is not at {SHARED_MNIST}")
    digits = data.load_mnist(SHARED_MNIST)
    assert digits.test_images.shape == (10000, 28, 28, 1)
    assert digits.test_labels[:5].tolist() == [7, 2, 1, 0, 4]  # the famous first digits
    assert sorted(np.unique(digits.test_labels)) == list(range(10))
    x_train, y_train, x_test, y_test = data.split(digits)
    assert (len(y_train), len(y_test)) == (8000, 2000)


# --- the npz's walls: checked from its directory and headers before anything is unpacked ------

def test_a_zip_bomb_of_zeros_is_refused_without_unpacking_it():
    bomb = zipped_zeros_npz(400 * 2**20)
    assert len(bomb) < 2 * 2**20                 # what the browser uploads
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="^not an MNIST npz: it would unpack to 400 MiB"):
            data.load_npz_bytes(bomb)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 * 2**20, peak                 # the directory was read, not the zeros


@pytest.mark.parametrize("arrays, words", [
    (dict(x_train=np.zeros((12, 100, 100), np.uint8)), "images of 100x100"),
    (dict(x_train=np.zeros((12, 28, 28, 3), np.uint8)), "images must be"),
    (dict(y_train=np.zeros(12, np.float32)), "y_train holds float32"),
    (dict(x_train=np.zeros((12, 28, 28), np.complex64)), "x_train holds complex64"),
])
def test_npz_headers_are_checked_against_mnists(arrays, words):
    with pytest.raises(ValueError, match=f"^not an MNIST npz: .*{words}"):
        data.load_npz_bytes(npz_bytes(**arrays))


def test_an_npz_of_mnists_full_size_passes_the_walls():
    # MNIST's shapes and dtypes (random pixels: the real file may not be on this machine)
    upload = npz_bytes(n_train=60_000, n_test=10_000)
    digits = data.load_npz_bytes(upload)
    assert digits.train_images.shape == (60_000, 28, 28, 1) and len(digits.test_labels) == 10_000
