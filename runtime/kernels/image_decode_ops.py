"""Image codecs: DecodeJpeg, DecodePng, DecodeGif, DecodeBmp, DecodeImage, EncodeJpeg, EncodePng,
ExtractJpegShape.

JPEG, PNG and GIF go through Pillow (``pillow>=10``; its JPEG codec is libjpeg-turbo, as TF's). BMP is
the small uncompressed format TF's own decoder reads, parsed here directly so that 32-bit alpha and
top-down rows come out as TF's do. Where results can differ from TF (listed in OPS.md, "Known
deviations"):

- JPEG ``dct_method``: TF's default ("" = INTEGER_FAST, libjpeg's JDCT_IFAST) is not selectable in
  Pillow, which always uses JDCT_ISLOW (TF's "INTEGER_ACCURATE"). With "INTEGER_ACCURATE" pixels
  equal TF's; with the default a pixel can differ by a few levels. ``fancy_upscaling=False`` is
  not selectable either (Pillow always upsamples chroma "fancily", TF's default).
- JPEG ``try_recover_truncated``/``acceptable_fraction``: a truncated JPEG is refused whatever they say.
- PNG: 16-bit colour PNGs decode through Pillow's 8-bit path, so ``dtype=uint16`` of a 16-bit RGB(A)
  PNG loses the low byte (16-bit grey is exact).
- GIF: frames are composed by Pillow (disposal and transparency); equal to TF's for full-frame GIFs.
- EncodeJpeg/EncodePng: the pixels decode as TF's encodings do, the bytes differ (zlib and libjpeg
  settings); EncodeJpeg honours ``quality``, ``progressive``, ``optimize_size`` and
  ``chroma_downsampling`` only.
"""

from __future__ import annotations

import io

import numpy as np

from runtime import dtypes
from runtime.errors import InvalidArgumentError, UnimplementedError
from runtime.kernels.math_ops import shape_str
from runtime.kernels.registry import kernel

_JPEG, _PNG, _GIF, _BMP = b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF8", b"BM"
_GRAY_MODES = {1: "L", 2: "LA", 3: "RGB", 4: "RGBA"}


def _pil():
    from PIL import Image  # imported on first use: only models that decode images pay for it

    return Image


def _contents(contents) -> bytes:
    array = np.asarray(contents, dtype=object)
    if array.ndim != 0:
        raise InvalidArgumentError(None, None, f"contents must be scalar, got shape {shape_str(array.shape)}")
    value = array[()]
    return value if isinstance(value, bytes) else str(value).encode()


def _check_channels(channels: int, allowed=(0, 1, 3)) -> None:
    if channels not in allowed:
        raise InvalidArgumentError(
            None,
            None,
            f"channels must be {', '.join(map(str, allowed[:-1]))} or {allowed[-1]}, got {channels}",
        )


def _open(data: bytes, what: str):
    try:
        image = _pil().open(io.BytesIO(data))
        image.load()
    except Exception as e:  # noqa: BLE001 - any codec failure is the data's fault
        raise InvalidArgumentError(
            None, None, f"Invalid {what} data or crop window, data size {len(data)}"
        ) from e
    return image


# -- JPEG --------------------------------------------------------------------------------------


def _jpeg(data: bytes, channels: int, ratio: int) -> np.ndarray:
    _check_channels(channels)
    if ratio not in (1, 2, 4, 8):
        raise InvalidArgumentError(None, None, f"ratio must be 1, 2, 4, or 8, got {ratio}")
    try:
        image = _pil().open(io.BytesIO(data))
        if image.format != "JPEG":
            raise ValueError(image.format)
        mode = {1: "L", 3: "RGB"}.get(channels) or ("L" if image.mode == "L" else "RGB")
        if ratio > 1 or channels:
            # libjpeg scales while decoding (scale_denom), and outputs grey straight from Y.
            w, h = image.size
            image.draft(mode, (max(1, w // ratio), max(1, h // ratio)))
        image.load()
    except Exception as e:  # noqa: BLE001
        raise InvalidArgumentError(
            None, None, "jpeg::Uncompress failed. Invalid JPEG data or crop window."
        ) from e
    if image.mode == "CMYK" and not channels:
        # Adobe CMYK JPEGs are stored inverted; libjpeg hands TF the stored values.
        return 255 - np.asarray(image, np.uint8)
    pixels = np.asarray(image.convert(mode), np.uint8)
    return pixels.reshape(pixels.shape[0], pixels.shape[1], -1)


@kernel("DecodeJpeg")
def decode_jpeg(
    contents,
    *,
    channels=0,
    ratio=1,
    fancy_upscaling=True,
    try_recover_truncated=False,
    acceptable_fraction=1.0,
    dct_method="",
):
    return _jpeg(_contents(contents), channels, ratio)


@kernel("ExtractJpegShape")
def extract_jpeg_shape(contents, *, output_type=dtypes.DT_INT32):
    data = _contents(contents)
    image = _open(data, "JPEG")
    depth = {"L": 1, "CMYK": 4}.get(image.mode, 3)
    dtype = np.int64 if output_type == dtypes.DT_INT64 else np.int32
    return np.array([image.size[1], image.size[0], depth], dtype)


# -- PNG ---------------------------------------------------------------------------------------


def _rgb_to_gray_libpng(rgb: np.ndarray) -> np.ndarray:
    """libpng's ``png_set_rgb_to_gray(png, 1, 0.299, 0.587)`` as TF calls it: coefficients in
    1/32768 truncated from 1/100000, blue the remainder, the sum truncated (no gamma tables)."""
    r, g, b = (rgb[..., i].astype(np.uint64) for i in range(3))
    return ((9797 * r + 19234 * g + 3737 * b) >> 15).astype(rgb.dtype)


def _png_pixels(image) -> np.ndarray:
    """Pixels as stored (palette expanded), 8- or 16-bit, (h, w, c)."""
    if image.mode in ("I;16", "I;16B", "I"):
        pixels = np.asarray(image).astype(np.uint16)
    elif image.mode in ("L", "LA", "RGB", "RGBA"):
        pixels = np.asarray(image, np.uint8)
    elif image.mode == "1":
        pixels = np.asarray(image.convert("L"), np.uint8)
    else:  # P, PA: expand the palette, with alpha where it has transparency
        has_alpha = "transparency" in image.info or image.mode == "PA"
        pixels = np.asarray(image.convert("RGBA" if has_alpha else "RGB"), np.uint8)
    return pixels.reshape(pixels.shape[0], pixels.shape[1], -1)


def _png(data: bytes, channels: int, dtype: int | None) -> np.ndarray:
    """Decoded pixels in ``dtype`` (uint8/uint16), or at the file's own depth for None."""
    if channels not in (0, 1, 3, 4):
        raise InvalidArgumentError(None, None, f"`channels` must be 0, 1, 3 or 4 but got {channels}")
    image = _open(data, "PNG")
    if image.format != "PNG":
        raise InvalidArgumentError(None, None, f"Invalid PNG header, data size {len(data)}")
    pixels = _set_channels(_png_pixels(image), channels)
    if dtype is None:
        return pixels
    return _convert_depth(pixels, np.uint16 if dtype == dtypes.DT_UINT16 else np.uint8)


def _set_channels(pixels: np.ndarray, channels: int) -> np.ndarray:
    """libpng's conversions: grey <-> RGB, alpha added (opaque) or stripped."""
    have = pixels.shape[-1]
    if not channels or channels == have:
        return pixels
    color = pixels[..., : 1 if have <= 2 else 3]
    alpha = pixels[..., -1:] if have in (2, 4) else None
    want_color = 1 if channels <= 2 else 3
    if color.shape[-1] != want_color:
        color = _rgb_to_gray_libpng(color)[..., None] if want_color == 1 else np.repeat(color, 3, axis=-1)
    if channels in (2, 4):
        opaque = np.iinfo(pixels.dtype).max
        alpha = alpha if alpha is not None else np.full(color.shape[:-1] + (1,), opaque, pixels.dtype)
        return np.concatenate([color, alpha], axis=-1)
    return color


def _convert_depth(pixels: np.ndarray, dtype) -> np.ndarray:
    if pixels.dtype == dtype:
        return pixels
    if dtype == np.uint16:
        return pixels.astype(np.uint16) * np.uint16(257)
    return (pixels >> 8).astype(np.uint8)  # libpng's png_set_strip_16 keeps the high byte


@kernel("DecodePng")
def decode_png(contents, *, channels=0, dtype=dtypes.DT_UINT8):
    return _png(_contents(contents), channels, dtype)


# -- GIF ---------------------------------------------------------------------------------------


def _gif(data: bytes) -> np.ndarray:
    image = _open(data, "GIF")
    if image.format != "GIF":
        raise InvalidArgumentError(None, None, f"Invalid GIF data (size {len(data)})")
    frames = []
    for index in range(getattr(image, "n_frames", 1)):
        image.seek(index)
        frames.append(np.asarray(image.convert("RGB"), np.uint8))
    return np.stack(frames)


@kernel("DecodeGif")
def decode_gif(contents):
    return _gif(_contents(contents))


# -- BMP ---------------------------------------------------------------------------------------


def _bmp(data: bytes, channels: int) -> np.ndarray:
    """TF's decode_bmp_op: BITMAPINFOHEADER, 8/24/32 bits, BGR(A) rows padded to 4 bytes."""
    _check_channels(channels, (0, 1, 3, 4))
    if len(data) < 34 or data[:2] != _BMP:
        raise InvalidArgumentError(None, None, f"Invalid BMP header, data size {len(data)}")
    offset = int.from_bytes(data[10:14], "little")
    width = int.from_bytes(data[18:22], "little", signed=True)
    height = int.from_bytes(data[22:26], "little", signed=True)
    bpp = int.from_bytes(data[28:30], "little")
    depth = bpp // 8
    if bpp not in (8, 24, 32) or width <= 0 or height == 0:
        raise InvalidArgumentError(
            None, None, f"Number of channels inherent in the image must be 1, 3 or 4, was {depth}"
        )
    if channels and channels != depth:
        raise InvalidArgumentError(
            None, None, f"channels attribute {channels} does not match bits per pixel from file {bpp}"
        )
    row = (width * depth + 3) // 4 * 4
    rows = abs(height)
    if offset + row * rows > len(data):
        raise InvalidArgumentError(None, None, f"Invalid BMP data size, data size {len(data)}")
    raw = np.frombuffer(data, np.uint8, row * rows, offset).reshape(rows, row)[:, : width * depth]
    pixels = raw.reshape(rows, width, depth)
    if height > 0:  # bottom-up rows
        pixels = pixels[::-1]
    if depth >= 3:  # BGR(A) -> RGB(A)
        pixels = np.concatenate([pixels[..., 2::-1], pixels[..., 3:]], axis=-1)
    return np.ascontiguousarray(pixels)


@kernel("DecodeBmp")
def decode_bmp(contents, *, channels=0):
    return _bmp(_contents(contents), channels)


# -- DecodeImage -------------------------------------------------------------------------------


@kernel("DecodeImage")
def decode_image(contents, *, channels=0, dtype=dtypes.DT_UINT8, expand_animations=True):
    data = _contents(contents)
    if data.startswith(_JPEG):
        pixels = _jpeg(data, channels, 1)
    elif data.startswith(_PNG):
        pixels = _png(data, channels, None)
        if dtype == dtypes.DT_UINT16 or (dtype == dtypes.DT_UINT8 and pixels.dtype == np.uint16):
            return _convert_depth(pixels, np.uint16 if dtype == dtypes.DT_UINT16 else np.uint8)
    elif data.startswith(_GIF):
        _check_channels(channels, (0, 3))
        pixels = _gif(data)
        if not expand_animations:
            pixels = pixels[0]
    elif data.startswith(_BMP):
        pixels = _bmp(data, channels)
    else:
        raise InvalidArgumentError(
            None, None, "Unknown image file format. One of JPEG, JPEG XL, PNG, GIF, BMP, WebP required."
        )
    return _to_dtype(pixels, dtype)


def _to_dtype(pixels: np.ndarray, dtype: int) -> np.ndarray:
    """TF's convert_image_dtype as DecodeImage applies it: uint8 -> uint16 x256 (a shift, unlike
    libpng's x257 for PNGs), -> float32 / the type's max."""
    if dtype == dtypes.DT_FLOAT:
        return pixels.astype(np.float32) / np.float32(np.iinfo(pixels.dtype).max)
    if dtype == dtypes.DT_UINT16 and pixels.dtype == np.uint8:
        return pixels.astype(np.uint16) << np.uint16(8)
    return pixels


# -- encoders ----------------------------------------------------------------------------------


def _image_arg(image, ranks=(3,)) -> np.ndarray:
    image = np.asarray(image)
    if image.ndim not in ranks:
        raise InvalidArgumentError(None, None, f"image must be 3-dimensional{shape_str(image.shape)}")
    return image


@kernel("EncodePng")
def encode_png(image, *, compression=-1):
    image = _image_arg(image)
    channels = image.shape[-1]
    if channels not in (1, 2, 3, 4):
        raise InvalidArgumentError(None, None, f"image must have 1, 2, 3, or 4 channels, got {channels}")
    if image.dtype == np.uint16:
        if channels != 1:
            raise UnimplementedError(None, None, "EncodePng: 16-bit PNGs with colour are not supported here")
        pil = _pil().fromarray(image[..., 0].astype(np.uint16), "I;16")
    else:
        pil = _pil().fromarray(
            image.reshape(image.shape[:2]) if channels == 1 else image, _GRAY_MODES[channels]
        )
    buffer = io.BytesIO()
    pil.save(buffer, "PNG", compress_level=6 if compression < 0 else int(compression))
    return np.array(buffer.getvalue(), dtype=object)


@kernel("EncodeJpeg")
def encode_jpeg(
    image,
    *,
    format="",
    quality=95,
    progressive=False,
    optimize_size=False,
    chroma_downsampling=True,
    density_unit="in",
    x_density=300,
    y_density=300,
    xmp_metadata="",
):
    image = _image_arg(image)
    channels = image.shape[-1]
    mode = {"grayscale": "L", "rgb": "RGB"}.get(format) or {1: "L", 3: "RGB"}.get(channels)
    if mode is None or (format and {"L": 1, "RGB": 3}[mode] != channels):
        raise InvalidArgumentError(
            None, None, f"image must have 1 or 3 channels, got {shape_str(image.shape)}"
        )
    pil = _pil().fromarray(image.reshape(image.shape[:2]) if channels == 1 else image, mode)
    buffer = io.BytesIO()
    pil.save(
        buffer,
        "JPEG",
        quality=int(quality),
        progressive=bool(progressive),
        optimize=bool(optimize_size),
        subsampling=2 if chroma_downsampling else 0,
        dpi=(x_density, y_density),
    )
    return np.array(buffer.getvalue(), dtype=object)
