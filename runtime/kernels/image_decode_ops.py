"""Image codecs: DecodeJpeg, DecodeAndCropJpeg, DecodePng, DecodeWebP, DecodeGif, DecodeBmp, DecodeImage, EncodeJpeg, EncodePng,
ExtractJpegShape.

JPEG goes through simplejpeg (``simplejpeg>=1.7``: libjpeg-turbo, TF's own JPEG library, with its
DCT method and chroma upsampling selectable, so pixels equal TF's for every ``dct_method`` and
``fancy_upscaling``); PNG, GIF and WebP, and both encoders, through Pillow (``pillow>=10``). BMP is the
small uncompressed format TF's own decoder reads, parsed here directly so that 32-bit alpha and
top-down rows come out as TF's do. Where results can differ from TF (listed in OPS.md, "Known
deviations"):

- JPEG ``try_recover_truncated``/``acceptable_fraction``: a truncated JPEG is refused whatever they say.
- PNG: 16-bit colour PNGs decode through Pillow's 8-bit path, so ``dtype=uint16`` of a 16-bit RGB(A)
  PNG loses the low byte (16-bit grey is exact).
- GIF: frames are composed by Pillow (disposal and transparency); equal to TF's for full-frame GIFs.
- EncodeJpeg/EncodePng: the pixels decode as TF's encodings do, the bytes differ (zlib and libjpeg
  settings); EncodeJpeg honours ``quality``, ``progressive``, ``optimize_size`` and
  ``chroma_downsampling`` only.
"""

from __future__ import annotations

import functools
import io

import numpy as np

from runtime import dtypes
from runtime.errors import InvalidArgumentError, UnimplementedError
from runtime.kernels.math_ops import shape_str
from runtime.kernels.registry import kernel

# Where results can differ from TF's (collected into OPS.md by runtime/ops_table.py).
DEVIATIONS = {
    "DecodeJpeg": "libjpeg-turbo through simplejpeg with TF's DCT method and upsampling: pixels equal"
    " TF's. `try_recover_truncated`/`acceptable_fraction` are not honoured: a truncated JPEG is"
    " refused; CMYK JPEGs decode with `channels=0` only.",
    "DecodeAndCropJpeg": "as DecodeJpeg, and the image is decoded whole, then cropped: TF decodes"
    " only the window, so with chroma subsampling the window's last column can differ by a few"
    " levels (up to 7 in the oracle records); every other pixel is exact.",
    "DecodeImage": "as DecodeJpeg, DecodePng, DecodeGif, DecodeBmp and DecodeWebP; JPEG XL (TF 2.21)"
    " is not decoded here.",
    "DecodeWebP": "decoded by Pillow's libwebp: lossless and lossy still images equal TF's; animated"
    " WebPs are composed by Pillow (TF 2.21 itself crashes on some).",
    "DecodePng": "16-bit colour (RGB/RGBA) PNGs come out of Pillow at 8 bits: with `dtype=uint16` the"
    " low byte differs from TF's (16-bit grey and every 8-bit PNG are exact).",
    "DecodeGif": "frames are composed by Pillow (disposal, transparency): equal to TF's for full-frame"
    " GIFs, partial frames with disposal may differ.",
    "EncodeJpeg": "the bytes differ from TF's (encoder settings); they decode to within 2 levels of"
    " TF's encoding. Only `quality`, `progressive`, `optimize_size`, `chroma_downsampling` are honoured.",
    "EncodePng": "the bytes differ from TF's (zlib settings); they decode to the same pixels.",
}
_JPEG, _PNG, _GIF, _BMP = b"\xff\xd8\xff", b"\x89PNG\r\n\x1a\n", b"GIF8", b"BM"


def _pil():
    from PIL import Image  # imported on first use: only models that decode images pay for it

    return Image


@functools.cache  # a call per image: the import statement alone costs as much as the checks
def _simplejpeg():
    import simplejpeg  # as _pil: on first use

    return simplejpeg


def _contents(contents) -> bytes:
    if type(contents) is bytes:  # an item of a string list (map_fn's elements): already scalar
        return contents
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


_BAD_JPEG = "jpeg::Uncompress failed. Invalid JPEG data or crop window."


def _jpeg(
    data: bytes, channels: int, ratio: int, dct_method: str = "", fancy_upscaling: bool = True
) -> np.ndarray:
    """libjpeg-turbo's decode with TF's flags: DCT method, chroma upsampling, scale 1/ratio."""
    _check_channels(channels)
    if ratio not in (1, 2, 4, 8):
        raise InvalidArgumentError(None, None, f"ratio must be 1, 2, 4, or 8, got {ratio}")
    simplejpeg = _simplejpeg()
    try:
        height, width, colorspace, _ = simplejpeg.decode_jpeg_header(data)
        source = 1 if colorspace == "Gray" else 4 if colorspace in ("CMYK", "YCCK") else 3
        if source == 4 and channels:
            raise UnimplementedError(None, None, "DecodeJpeg: CMYK JPEGs decode with channels=0 only here")
        target = {1: "GRAY", 3: "RGB", 4: "CMYK"}[channels or source]
        pixels = simplejpeg.decode_jpeg(
            data,
            colorspace=target,
            fastdct=dct_method != "INTEGER_ACCURATE",  # TF's default "" is INTEGER_FAST
            fastupsample=not fancy_upscaling,
            min_height=-(-height // ratio),
            min_width=-(-width // ratio),
            min_factor=ratio,
        )
    except UnimplementedError:
        raise
    except Exception as e:  # noqa: BLE001 - any codec failure is the data's fault
        raise InvalidArgumentError(None, None, _BAD_JPEG) from e
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
    return _jpeg(_contents(contents), channels, ratio, dct_method, fancy_upscaling)


@kernel("DecodeAndCropJpeg")
def decode_and_crop_jpeg(
    contents,
    crop_window,
    *,
    channels=0,
    ratio=1,
    fancy_upscaling=True,
    try_recover_truncated=False,
    acceptable_fraction=1.0,
    dct_method="",
):
    pixels = _jpeg(_contents(contents), channels, ratio, dct_method, fancy_upscaling)
    window = [int(v) for v in np.asarray(crop_window).reshape(-1)]
    if len(window) != 4:
        raise InvalidArgumentError(
            None, None, f"crop_window must be shape [4], got {shape_str(np.shape(crop_window))}"
        )
    y, x, h, w = window
    if h <= 0 or w <= 0 or y < 0 or x < 0 or y + h > pixels.shape[0] or x + w > pixels.shape[1]:
        raise InvalidArgumentError(None, None, _BAD_JPEG)
    return np.ascontiguousarray(pixels[y : y + h, x : x + w])


@kernel("ExtractJpegShape")
def extract_jpeg_shape(contents, *, output_type=dtypes.DT_INT32):
    try:
        height, width, colorspace, _ = _simplejpeg().decode_jpeg_header(_contents(contents))
    except ValueError as e:
        raise InvalidArgumentError(None, None, "Could not read image shape: not a valid JPEG") from e
    depth = 1 if colorspace == "Gray" else 4 if colorspace in ("CMYK", "YCCK") else 3
    dtype = np.int64 if output_type == dtypes.DT_INT64 else np.int32
    return np.array([height, width, depth], dtype)


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


# -- WebP --------------------------------------------------------------------------------------


def _webp(data: bytes, channels: int) -> np.ndarray:
    """(frames, h, w, c) as TF 2.21's DecodeWebP: c is 4 with alpha, else 3; channels must agree."""
    _check_channels(channels, (0, 3, 4))
    image = _open(data, "WebP")
    if image.format != "WEBP":
        raise InvalidArgumentError(None, None, f"Invalid WebP data (size {len(data)})")
    frames = getattr(image, "n_frames", 1)
    depth = 4 if frames > 1 or image.mode == "RGBA" else 3
    if frames > 1 and channels == 3:
        raise InvalidArgumentError(None, None, "WebP Animation must be 4 channel RGBA")
    if channels and channels != depth:
        raise InvalidArgumentError(None, None, "Number of channels requested does not match input")
    pixels = []
    for index in range(frames):
        image.seek(index)
        pixels.append(np.asarray(image.convert("RGBA" if depth == 4 else "RGB"), np.uint8))
    return np.stack(pixels)


@kernel("DecodeWebP")
def decode_webp(contents, *, channels=0, dtype=dtypes.DT_UINT8):
    return _webp(_contents(contents), channels)


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
        pixels = _jpeg(data, channels, 1)  # TF's DecodeImage: default DCT, fancy upsampling
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
    elif data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        pixels = _webp(data, channels)
        if not expand_animations:
            pixels = pixels[0]
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


def _from_uint8(image: np.ndarray):
    """A Pillow image of (h, w, 1|2|3|4) uint8 pixels: L, LA, RGB or RGBA."""
    image = np.ascontiguousarray(image, dtype=np.uint8)
    if image.shape[-1] == 2:
        return _pil().merge("LA", [_pil().fromarray(np.ascontiguousarray(image[..., i])) for i in (0, 1)])
    return _pil().fromarray(image[..., 0] if image.shape[-1] == 1 else image)


@kernel("EncodePng")
def encode_png(image, *, compression=-1):
    image = _image_arg(image)
    channels = image.shape[-1]
    if channels not in (1, 2, 3, 4):
        raise InvalidArgumentError(None, None, f"image must have 1, 2, 3, or 4 channels, got {channels}")
    if image.dtype == np.uint16:
        if channels != 1:
            raise UnimplementedError(None, None, "EncodePng: 16-bit PNGs with colour are not supported here")
        pil = _pil().fromarray(np.ascontiguousarray(image[..., 0]))  # mode I;16
    else:
        pil = _from_uint8(image)
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
    pil = _from_uint8(image.astype(np.uint8, copy=False))
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
