"""DecodeJpeg against libjpeg-turbo called with the header's sizes, for every colour source, DCT
method and upsampling; CMYK and bad data refused with the same errors whatever ``channels`` says.

The header must be read: libjpeg-turbo converts CMYK to RGB where asked, which TF refuses, so a
decode that skips it (tried for speed) passes the pixel checks and fails the CMYK one. TF's own
pixels and errors are checked by the records in ``test_image_ops.py``."""

from __future__ import annotations

import io

import numpy as np
import pytest
import simplejpeg
from PIL import Image

from runtime import errors
from runtime.kernels import load_all

KERNELS = load_all()  # the whole registry: these tests call kernels by op type

rng = np.random.default_rng(3)


def _jpeg(mode: str, shape: tuple, **save) -> bytes:
    pixels = rng.integers(0, 256, shape, dtype=np.uint8)
    buffer = io.BytesIO()
    Image.fromarray(pixels, mode).save(buffer, format="JPEG", **save)
    return buffer.getvalue()


IMAGES = {
    "rgb 4:2:0": _jpeg("RGB", (37, 45, 3)),
    "rgb 4:4:4": _jpeg("RGB", (17, 9, 3), subsampling=0),
    "rgb 4:2:2 progressive": _jpeg("RGB", (8, 31, 3), subsampling=1, progressive=True),
    "gray": _jpeg("L", (29, 23)),
}
CMYK = _jpeg("CMYK", (12, 10, 4))


def _header_path(data: bytes, channels: int, dct_method: str, fancy_upscaling: bool) -> np.ndarray:
    """A full-size decode with sizes from the header, scale 1."""
    height, width, _, _ = simplejpeg.decode_jpeg_header(data)
    pixels = simplejpeg.decode_jpeg(
        data,
        colorspace={1: "GRAY", 3: "RGB"}[channels],
        fastdct=dct_method != "INTEGER_ACCURATE",
        fastupsample=not fancy_upscaling,
        min_height=height,
        min_width=width,
        min_factor=1,
    )
    return pixels.reshape(height, width, -1)


def _outcome(data: bytes, **attrs):
    try:
        return KERNELS["DecodeJpeg"].fn(np.array(data, dtype=object), **attrs)
    except errors.OpError as e:
        return type(e), e.message


@pytest.mark.parametrize("image", list(IMAGES))
@pytest.mark.parametrize("channels", [1, 3])
@pytest.mark.parametrize("dct_method", ["", "INTEGER_ACCURATE", "INTEGER_FAST"])
@pytest.mark.parametrize("fancy_upscaling", [True, False])
def test_full_size_decodes_equal_libjpeg_turbos(image, channels, dct_method, fancy_upscaling):
    data = IMAGES[image]
    got = KERNELS["DecodeJpeg"].fn(
        np.array(data, dtype=object),
        channels=channels,
        dct_method=dct_method,
        fancy_upscaling=fancy_upscaling,
    )
    want = _header_path(data, channels, dct_method, fancy_upscaling)
    assert got.shape == want.shape and got.dtype == np.uint8 and got.tobytes() == want.tobytes()
    scaled = KERNELS["DecodeJpeg"].fn(np.array(data, dtype=object), channels=channels, ratio=2)
    assert scaled.shape == (-(-want.shape[0] // 2), -(-want.shape[1] // 2), channels)


def test_cmyk_decodes_with_channels_0_only():
    assert KERNELS["DecodeJpeg"].fn(np.array(CMYK, dtype=object)).shape == (12, 10, 4)
    for channels in (1, 3):
        kind, message = _outcome(CMYK, channels=channels)
        assert kind is errors.UnimplementedError and "CMYK JPEGs decode with channels=0 only" in message


@pytest.mark.parametrize(
    "data", [b"", b"\xff\xd8\xff", b"not a jpeg at all", IMAGES["rgb 4:2:0"][:200], IMAGES["gray"][:-40]]
)
def test_bad_data_raises_the_same_error_with_any_channels(data):
    errs = {_outcome(data, channels=c)[1] for c in (0, 1, 3)}
    assert errs == {"jpeg::Uncompress failed. Invalid JPEG data or crop window."}
    assert _outcome(data, channels=3)[0] is errors.InvalidArgumentError
