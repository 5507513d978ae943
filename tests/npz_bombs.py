"""A zip bomb in an npz: the upload the walls must refuse from its directory and headers,
built in chunks so the test never holds the zeros."""
import io
import zipfile

import numpy as np


def zipped_zeros_npz(nbytes: int, shape=None, key="x_train") -> bytes:
    """An npz whose `key` is `nbytes` of zeros (uint8), written in chunks: a zip bomb of a
    few hundred KB, made without holding the zeros."""
    shape = shape or (nbytes // (28 * 28), 28, 28)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        with archive.open(f"{key}.npy", "w", force_zip64=True) as member:
            np.lib.format.write_array_header_1_0(
                member, {"descr": "|u1", "fortran_order": False, "shape": shape})
            chunk = bytes(2**20)
            for _ in range(nbytes // len(chunk)):
                member.write(chunk)
        for other in ("y_train", "x_test", "y_test"):
            if other != key:
                member_bytes = io.BytesIO()
                np.save(member_bytes, np.zeros((10, 28, 28) if other[0] == "x" else 10, np.uint8))
                archive.writestr(f"{other}.npy", member_bytes.getvalue())
    return buffer.getvalue()
