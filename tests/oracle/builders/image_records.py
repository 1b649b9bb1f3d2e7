"""Image decoding as TensorFlow does it: a SavedModel taking encoded images, and per-op records.

Runs inside the oracle venv named by ``VENV`` (``python -m tests.oracle build --only image_models``).

``image_models`` is a ``tf.Module`` whose signatures take a batch of serialized images (a 1-D
string tensor), decode each (``tf.map_fn``), resize to 16x16 (bilinear, half-pixel centres) and
run a small convolution: ``jpeg`` (DecodeJpeg, INTEGER_ACCURATE DCT), ``png`` (DecodePng) and
``serving_default`` (DecodeImage, TF's default DCT). Test images are synthetic and made here with
TF's own encoders (GIF, BMP and palette PNG, which TF cannot encode, by the small writers below).

Beside the model, ``records/`` holds one record per op call, run eagerly through ``tf.raw_ops``::

    records.json            {"tf_version", "records": {name: entry}}
    records/<name>/in_<i>.pb    inputs in TF's input order (TensorProtos)
    records/<name>/out_<i>.pb   outputs in TF's output order

An entry is ``{"op", "attrs", "inputs": [files], "atol"}`` plus ``"outputs": [files]`` or, where TF
raised, ``"error": {"class", "message"}``. Attr values are JSON; a dtype is ``{"dtype": "uint16"}``.
``tests/runtime/test_image_ops.py`` replays every record through our kernels.
"""

from __future__ import annotations

import base64
import json
import re
import struct
import zlib
from pathlib import Path

import numpy as np
import tensorflow as tf

from tests.oracle.tfside import Case, model, rng

VENV = "tf221"
FAMILY = "images"


# -- test images ------------------------------------------------------------------------------


def _picture(h: int, w: int, channels: int, seed: int) -> np.ndarray:
    """Smooth gradients plus noise: JPEG-like content with some edges."""
    y, x = np.mgrid[0:h, 0:w].astype(np.float32)
    base = [128 + 100 * np.sin(x / 7 + c) * np.cos(y / 5 - c) for c in range(channels)]
    noise = rng(seed).normal(0, 12, size=(h, w, channels))
    return np.clip(np.stack(base, -1) + noise, 0, 255).astype(np.uint8)


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def palette_png(
    indices: np.ndarray, palette: list[tuple[int, int, int]], alpha: list[int] | None = None
) -> bytes:
    h, w = indices.shape
    header = struct.pack(">IIBBBBB", w, h, 8, 3, 0, 0, 0)
    raw = b"".join(b"\0" + bytes(row.astype(np.uint8)) for row in indices)
    chunks = [_png_chunk(b"IHDR", header), _png_chunk(b"PLTE", bytes(v for rgb in palette for v in rgb))]
    if alpha is not None:
        chunks.append(_png_chunk(b"tRNS", bytes(alpha)))
    chunks += [_png_chunk(b"IDAT", zlib.compress(raw)), _png_chunk(b"IEND", b"")]
    return b"\x89PNG\r\n\x1a\n" + b"".join(chunks)


def bmp(pixels: np.ndarray, top_down: bool = False) -> bytes:
    """An uncompressed BITMAPINFOHEADER BMP of (h, w, 1|3|4) uint8 pixels (RGB(A) order)."""
    h, w, c = pixels.shape
    data = pixels[..., ::-1] if c == 3 else (pixels[..., [2, 1, 0, 3]] if c == 4 else pixels)
    rows = data if top_down else data[::-1]
    stride = (w * c + 3) // 4 * 4
    body = b"".join(bytes(r.reshape(-1)) + b"\0" * (stride - w * c) for r in rows)
    palette = bytes(v for i in range(256) for v in (i, i, i, 0)) if c == 1 else b""
    offset = 14 + 40 + len(palette)
    info = struct.pack("<IiiHHIIiiII", 40, w, -h if top_down else h, 1, 8 * c, 0, len(body), 2835, 2835, 0, 0)
    return b"BM" + struct.pack("<IHHI", offset + len(body), 0, 0, offset) + info + palette + body


def gif(frames: list[np.ndarray], palette: list[tuple[int, int, int]]) -> bytes:
    """A GIF of full-size frames of palette indices (< 8 colours), LZW-coded with a clear code
    after every two literals so that every code stays 4 bits wide."""
    h, w = frames[0].shape
    out = [b"GIF89a", struct.pack("<HHBBB", w, h, 0xF2, 0, 0)]
    out.append(bytes(v for rgb in (palette + [(0, 0, 0)] * 8)[:8] for v in rgb))
    if len(frames) > 1:
        out.append(b"\x21\xff\x0bNETSCAPE2.0\x03\x01\x00\x00\x00")
    for frame in frames:
        out.append(b"\x21\xf9\x04\x04\x0a\x00\x00\x00")  # disposal: do not dispose; 0.1 s
        out.append(b"\x2c" + struct.pack("<HHHHB", 0, 0, w, h, 0) + b"\x03")
        codes, bits, nbits, data = [], 0, 0, bytearray()
        flat = frame.reshape(-1).tolist()
        for i in range(0, len(flat), 2):
            codes += [8, *flat[i : i + 2]]
        codes.append(9)
        for code in codes:
            bits |= code << nbits
            nbits += 4
            while nbits >= 8:
                data.append(bits & 0xFF)
                bits >>= 8
                nbits -= 8
        if nbits:
            data.append(bits & 0xFF)
        for i in range(0, len(data), 255):
            block = bytes(data[i : i + 255])
            out.append(bytes([len(block)]) + block)
        out.append(b"\x00")
    out.append(b"\x3b")
    return b"".join(out)


# WebP test images, made with Pillow (libwebp 1.6) in the main venv: TF 2.21 decodes WebP but has
# no WebP encoder. 10x12 pixels: lossless RGB, lossless RGBA, lossy RGB.
# (TF 2.21 crashes decoding Pillow's animated WebP with channels=0: no animated record.)
WEBP_BASE64 = {
    "webp_lossless_rgb": (
        "UklGRu4BAABXRUJQVlA4TOEBAAAvC0ACAL/jOLJt0zrP9nvfxtDh/1Q4s31903Ac23bafJmZ2Ttnlw6ySilpIFUz"
        "syTjt9wGAIAkdHc3HGA+4LM+4DO5093Yzn8MtofMlkhA4QmmdZCKYFHd5NkwdqFVVRC0kuGM4G9Y0gIiTJlOKlP+"
        "qNITGEIjzVz+cZICm/KWGzvxxNsHecf4/ROZvn764uWKDvBFF7D3TLnTHxtFMFIUndHUTSrsWZTmdwgdEa2OQamq"
        "az54CeIu8UxC6k5nvrqwEaa6H7p4+tCZQll3fNi1H/B9uXoPXSvnaTBj9+OtKJIUXO3LsAEGoMAUOcBBp9b3z0Hu"
        "ipIdPfHl5n2BplDjL7380P8OY/xbAugyAPR+Rn3Tuyegw9Nd3Inb3W98QdpP/MnNUwWxKWUVIzpB7Ssgv1B/bVhs"
        "EE/pA7edn/a2BZHaB0T/Q+s/kEG2EL3jN6EujmSA59mfCTo30KgRdeiJ2oPcT+eozuAwAACiVZWbbdu2bdu2jYj+"
        "B6dUqdWbnW5PT7pGc6lVo9pq93XY3ZXPpIvl2WCohsCCxxdf8PiCsUKlddiCMSZbLJXI5CO7hUpbf35/kXAyNZDf"
        "5/1u+2Vxl3OccHsdjhs6I5JIauDH83ShhEMBf1YJICjRaDJbnW4vAA=="
    ),
    "webp_lossless_rgba": (
        "UklGRmYCAABXRUJQVlA4TFoCAAAvC0ACEL/jMLZt07nfVmz2kNbTjG0nz2jDbWzbqnLlO+7uZEQURIX0whBRgbvL"
        "cze2bavJs58Ed9dSh8x0qBhAVmrc3Xn/Q4EAgGA027a9VbN5e6Nbyf/V/m7b32wj2baZfHGaj7cxXBuNrX26OWnV"
        "uBOFgZKdFFw5YOaf/t74Nt/DR1ZVEBSVZkkz7MZfE1wb39zHopUC6E0CUkeZ6a8Idsn6M/R0kV4dIwNSXzoJbNvj"
        "e6cm9Cys/gHsbwBa+tGHUfk+WXHw1UI/Onn6LkjFmXmURH7PVMVWmOz7D6LJzWVHp3PuGsXsXY2FcWK9jOlbeHyz"
        "ezDT8i69/aVGxdADFxzMypzB+YbBZubvtt2H8ns/v/3gekMyo8jPSQ8vWEj7n/9GVi2gXYxd7M7hDH+XxpCd5ssb"
        "+790PJ8p26r81zqpsLTp4zD88hl6Yga9d+I0/ovGNlLRXZ4a2G6Cy6yQL+LAQsFPt4RcpSm6i0rYPd5y/8BY57tc"
        "2OW7d6yqjhGkzosexT/9AV1FKbaWclfWVqwCtd2eg4rnfCV0aTBcqtls/amu4VKgN4WNRuMlGZ8e+ZO7fWdarSh8"
        "xYeLfF9dxe0on4lUoUvxZj8YS8XX6r7nU//sbuuRLe9O/+dTlVfBYQAARKsqN9u2bdu2bRsR/Q8NkUylM1hsTrGQ"
        "sUPYj0Zh/rmzydgdAHEC6c3jL9aroNcPf1UKuVh0mMfCFptee7qcJUdBNFE11R+3q1T2fJWS6V6r2bjrlOrPNJcd"
        "tDs1o8GBoMvNaNjtp8xWpwsQ7re7fLkSj4Q8Pg=="
    ),
    "webp_lossy_rgb": (
        "UklGRogAAABXRUJQVlA4IHwAAACwAgCdASoMAAoAAUAmJbACdDiABydX3SncuhqJfAAA/vVU+nNN/IPsbR/2kh/s"
        "j6iX0sHHgNWSBfwTo45NAXqs8GIYaHzgNQ3OXhTBIxaxXZ7+6RyyuGKj80vNXH+Z2djf33MmPOyB1dyaO3o/Jm0G"
        "v/3YxiEzbTsaAAAA"
    ),
}


def _images() -> dict[str, bytes]:
    rgb, gray = _picture(37, 45, 3, 1), _picture(29, 23, 1, 2)
    rgba = np.concatenate([_picture(21, 26, 3, 3), _picture(21, 26, 1, 4)], -1)
    rgb16 = (_picture(12, 10, 3, 5).astype(np.uint16) * 257 + rng(6).integers(0, 256, (12, 10, 3))).astype(
        np.uint16
    )
    gray16 = rgb16[..., :1]
    palette = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (250, 250, 250), (10, 20, 30)]
    indices = rng(7).integers(0, 5, size=(9, 13))
    return {
        "rgb_q90": tf.io.encode_jpeg(rgb, quality=90).numpy(),
        "rgb_q75_444": tf.io.encode_jpeg(rgb, quality=75, chroma_downsampling=False).numpy(),
        "rgb_progressive": tf.io.encode_jpeg(rgb, quality=85, progressive=True).numpy(),
        "gray_jpeg": tf.io.encode_jpeg(gray, quality=90).numpy(),
        "rgb_png": tf.io.encode_png(rgb).numpy(),
        "rgba_png": tf.io.encode_png(rgba).numpy(),
        "gray_png": tf.io.encode_png(gray).numpy(),
        "gray16_png": tf.io.encode_png(gray16).numpy(),
        "rgb16_png": tf.io.encode_png(rgb16).numpy(),
        "palette_png": palette_png(indices, palette),
        "palette_trns_png": palette_png(indices, palette, alpha=[255, 0, 128]),
        "rgb_bmp": bmp(_picture(7, 9, 3, 8)),
        "rgba_bmp": bmp(_picture(5, 6, 4, 9)),
        "top_down_bmp": bmp(_picture(6, 5, 3, 10), top_down=True),
        "gif_1": gif([indices], palette),
        "gif_2": gif([indices, (indices + 1) % 5], palette),
        **{name: base64.b64decode(text) for name, text in WEBP_BASE64.items()},
    }


# -- records ----------------------------------------------------------------------------------


def _records(images: dict[str, bytes]) -> list[tuple[str, str, list, dict, float]]:
    """(name, op, inputs, attrs, atol) for every record."""
    s = {k: np.array(v, dtype=object) for k, v in images.items()}
    out = []
    for name in ("rgb_q90", "rgb_q75_444", "rgb_progressive", "gray_jpeg"):
        for channels in (0, 1, 3):
            out.append(
                (
                    f"jpeg_{name}_c{channels}",
                    "DecodeJpeg",
                    [s[name]],
                    {"channels": channels, "dct_method": "INTEGER_ACCURATE"},
                    0,
                )
            )
        out.append((f"jpeg_{name}_default_dct", "DecodeJpeg", [s[name]], {}, 0))
        out.append((f"jpeg_{name}_fast_upsampling", "DecodeJpeg", [s[name]], {"fancy_upscaling": False}, 0))
        out.append((f"jpeg_shape_{name}", "ExtractJpegShape", [s[name]], {}, 0))
    for ratio in (2, 4, 8):
        attrs = {"ratio": ratio, "dct_method": "INTEGER_ACCURATE"}
        out.append((f"jpeg_ratio_{ratio}", "DecodeJpeg", [s["rgb_q90"]], attrs, 0))
    for window in ([3, 5, 20, 17], [0, 0, 37, 45], [11, 30, 26, 15], [30, 40, 10, 10]):
        attrs = {"channels": 3, "dct_method": "INTEGER_ACCURATE"}
        crop = np.array(window, np.int32)
        name = f"jpeg_crop_{'_'.join(map(str, window))}"
        # TF decodes only the window: chroma upsampled at its right edge may be a few levels off ours.
        out.append((name, "DecodeAndCropJpeg", [s["rgb_q90"], crop], attrs, 8))
    out.append(
        ("jpeg_shape_int64", "ExtractJpegShape", [s["rgb_q90"]], {"output_type": {"dtype": "int64"}}, 0)
    )
    truncated = np.array(images["rgb_q90"][: len(images["rgb_q90"]) // 2], object)
    out.append(("jpeg_truncated", "DecodeJpeg", [truncated], {}, 0))
    out.append(("jpeg_garbage", "DecodeJpeg", [np.array(b"\xff\xd8\xffgarbage", object)], {}, 0))
    for name in ("rgb_png", "rgba_png", "gray_png", "palette_png", "palette_trns_png"):
        for channels in (0, 1, 2, 3, 4):
            out.append((f"png_{name}_c{channels}", "DecodePng", [s[name]], {"channels": channels}, 0))
    out.append(("png_rgb_png_u16", "DecodePng", [s["rgb_png"]], {"dtype": {"dtype": "uint16"}}, 0))
    for name in ("gray16_png", "rgb16_png"):
        for dtype in ("uint8", "uint16"):
            out.append((f"png_{name}_{dtype}", "DecodePng", [s[name]], {"dtype": {"dtype": dtype}}, 0))
    for name in ("rgb_bmp", "rgba_bmp", "top_down_bmp"):
        out.append((f"bmp_{name}", "DecodeBmp", [s[name]], {}, 0))
    for name in ("gif_1", "gif_2"):
        out.append((f"gif_{name}", "DecodeGif", [s[name]], {}, 0))
    for name in ("rgb_q90", "rgb_png", "rgb_bmp", "gif_2", "gray16_png"):
        for dtype in ("uint8", "uint16", "float32"):
            attrs = {"channels": 3, "dtype": {"dtype": dtype}, "expand_animations": name != "gif_2"}
            atol = 1e-7 if dtype == "float32" else 0
            out.append((f"image_{name}_{dtype}", "DecodeImage", [s[name]], attrs, atol))
    for name in WEBP_BASE64:
        for channels in (0, 3, 4):
            out.append((f"webp_{name}_c{channels}", "DecodeWebP", [s[name]], {"channels": channels}, 0))
        for expand in (True, False):
            attrs = {"channels": 3, "expand_animations": expand}
            out.append((f"image_{name}_expand_{expand}", "DecodeImage", [s[name]], attrs, 0))
    out.append(("image_unknown", "DecodeImage", [np.array(b"not an image", object)], {}, 0))
    pictures = {"rgb": _picture(11, 14, 3, 11), "gray": _picture(8, 5, 1, 12), "rgba": _picture(6, 7, 4, 13)}
    for name, picture in pictures.items():
        out.append((f"encode_png_{name}", "EncodePng", [picture], {}, 0))
    for name in ("rgb", "gray"):
        out.append((f"encode_jpeg_{name}", "EncodeJpeg", [pictures[name]], {"quality": 90}, 0))
    return out + _pixel_records()


def _pixel_records() -> list[tuple[str, str, list, dict, float]]:
    """Resize and colour ops on decoded-looking images (uint8 and [0, 1] floats). Tolerances are a
    few float32 ulps of the outputs (values up to 255 for uint8 inputs)."""
    u8 = _picture(13, 17, 3, 20)[None]
    f32 = (u8.astype(np.float32) / 255.0).astype(np.float32)
    size = np.array([21, 9], np.int32)
    out = []
    for flags in ({}, {"half_pixel_centers": True}, {"align_corners": True}):
        key = "_".join(flags) or "legacy"
        for op in ("ResizeBicubic", "ResizeBilinear", "ResizeNearestNeighbor"):
            out.append((f"{op}_{key}_u8", op, [u8, size], flags, 5e-4))
            out.append((f"{op}_{key}_f32", op, [f32, size], flags, 2e-6))
    out.append(("ResizeArea_u8", "ResizeArea", [u8, size], {}, 5e-4))
    out.append(("ResizeArea_align_f32", "ResizeArea", [f32, size], {"align_corners": True}, 2e-6))
    scale, translation = np.array([1.6, 0.55], np.float32), np.array([0.5, -1.0], np.float32)
    for kernel_type in ("lanczos3", "keyscubic", "triangle", "gaussian", "box", "mitchellcubic"):
        for antialias in (True, False):
            attrs = {"kernel_type": kernel_type, "antialias": antialias}
            out.append(
                (
                    f"ScaleAndTranslate_{kernel_type}_{antialias}",
                    "ScaleAndTranslate",
                    [f32, size, scale, translation],
                    attrs,
                    1e-6,
                )
            )
    out.append(("RGBToHSV", "RGBToHSV", [f32[0]], {}, 1e-6))
    hsv = np.stack([f32[0, ..., 0], f32[0, ..., 1], f32[0, ..., 2]], -1)
    out.append(("HSVToRGB", "HSVToRGB", [hsv], {}, 1e-6))
    out.append(("AdjustHue", "AdjustHue", [f32[0], np.float32(0.3)], {}, 1e-6))
    out.append(("AdjustSaturation", "AdjustSaturation", [f32[0], np.float32(1.7)], {}, 1e-6))
    out.append(("AdjustContrastv2", "AdjustContrastv2", [f32, np.float32(0.6)], {}, 1e-6))
    boxes = np.array([[0.1, 0.2, 0.8, 0.9], [0.0, 0.0, 1.0, 1.0], [0.5, -0.2, 1.3, 0.6]], np.float32)
    box_ind, crop = np.array([0, 0, 0], np.int32), np.array([7, 5], np.int32)
    for method in ("bilinear", "nearest"):
        out.append(
            (f"CropAndResize_{method}", "CropAndResize", [u8, boxes, box_ind, crop], {"method": method}, 5e-4)
        )
    r = rng(21)
    corners = r.uniform(0, 1, size=(40, 2)).astype(np.float32)
    nms_boxes = np.concatenate([corners, corners + r.uniform(0.05, 0.4, size=(40, 2)).astype(np.float32)], -1)
    scores = r.uniform(0, 1, size=(40,)).astype(np.float32)
    args = [nms_boxes, scores, np.int32(12), np.float32(0.4), np.float32(0.2)]
    out.append(("NonMaxSuppressionV3", "NonMaxSuppressionV3", args, {}, 0))
    out.append(("NonMaxSuppressionV4", "NonMaxSuppressionV4", args, {"pad_to_max_output_size": True}, 0))
    # soft_nms_sigma > 0 (Soft-NMS) has no kernel yet: its record would fail, so it waits for one.
    out.append(("NonMaxSuppressionV5", "NonMaxSuppressionV5", [*args, np.float32(0.0)], {}, 1e-6))
    return out


def _attr(value):
    if isinstance(value, dict):
        return tf.as_dtype(value["dtype"])
    return value


def _write(path: Path, value) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tf.make_tensor_proto(value).SerializeToString())
    return path.name


def _run_record(folder: Path, name: str, op: str, inputs: list, attrs: dict, atol: float) -> dict:
    op_def = tf.raw_ops.__dict__[op]
    arg_names = [a.name for a in _op_def(op).input_arg]
    entry = {"op": op, "attrs": attrs, "atol": atol, "inputs": []}
    for i, value in enumerate(inputs):
        entry["inputs"].append(f"{name}/{_write(folder / name / f'in_{i}.pb', value)}")
    try:
        result = op_def(**dict(zip(arg_names, inputs)), **{k: _attr(v) for k, v in attrs.items()})
    except (tf.errors.OpError, ValueError, TypeError) as error:
        message = getattr(error, "message", None) or str(error)
        message = re.sub(r"^\{\{function_node [^}]*\}\} ", "", message.split("\n")[0].split(" [Op:")[0])
        entry["error"] = {"class": type(error).__name__, "message": message}
        return entry
    results = result if isinstance(result, (list, tuple)) else [result]
    entry["outputs"] = [
        f"{name}/{_write(folder / name / f'out_{i}.pb', r.numpy())}" for i, r in enumerate(results)
    ]
    return entry


def _op_def(op: str):
    from tensorflow.python.framework import op_def_registry

    return op_def_registry.get(op)


def write_records(folder: Path) -> None:
    records = {}
    for name, op, inputs, attrs, atol in _records(_images()):
        records[name] = _run_record(folder / "records", name, op, inputs, attrs, atol)
    (folder / "records.json").write_text(
        json.dumps({"tf_version": tf.__version__, "records": records}, indent=1)
    )


# -- the SavedModel ---------------------------------------------------------------------------

_SIZE = 16


class ImageModel(tf.Module):
    def __init__(self):
        super().__init__()
        r = rng(30)
        self.kernel = tf.Variable(r.normal(0, 0.3, size=(3, 3, 3, 4)).astype(np.float32), name="kernel")
        self.bias = tf.Variable(r.normal(0, 0.1, size=(4,)).astype(np.float32), name="bias")

    def _head(self, decode, images):
        def one(serialized):
            pixels = tf.cast(decode(serialized), tf.float32) / 255.0
            return tf.image.resize(pixels, [_SIZE, _SIZE])

        spec = tf.TensorSpec([_SIZE, _SIZE, 3], tf.float32)
        batch = tf.map_fn(one, images, fn_output_signature=spec)
        features = tf.nn.relu(tf.nn.conv2d(batch, self.kernel, 1, "SAME") + self.bias)
        return {"features": features, "pooled": tf.reduce_mean(features, axis=[1, 2])}

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="images")])
    def jpeg(self, images):
        return self._head(lambda s: tf.io.decode_jpeg(s, channels=3, dct_method="INTEGER_ACCURATE"), images)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="images")])
    def png(self, images):
        return self._head(lambda s: tf.io.decode_png(s, channels=3), images)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="images")])
    def any_image(self, images):
        decode = lambda s: tf.ensure_shape(  # noqa: E731
            tf.io.decode_image(s, channels=3, expand_animations=False), [None, None, 3]
        )
        return self._head(decode, images)


@model("image_models")
def image_models(export_dir: str) -> list[Case]:
    """Encoded images in -> decode -> resize -> conv; per-op decode records beside it."""
    write_records(Path(export_dir).parent)
    module = ImageModel()
    signatures = {"serving_default": module.any_image, "jpeg": module.jpeg, "png": module.png}
    tf.saved_model.save(module, export_dir, signatures=signatures)
    images = _images()
    jpegs = np.array([images["rgb_q90"], images["rgb_progressive"], images["gray_jpeg"]], object)
    pngs = np.array(
        [images["rgb_png"], images["rgba_png"], images["palette_png"], images["gray16_png"]], object
    )
    mixed = np.array([images["rgb_q90"], images["rgb_png"], images["rgb_bmp"], images["gif_2"]], object)
    return [
        Case("jpeg", {"images": jpegs}, atol=1e-5),
        Case("png", {"images": pngs}, atol=1e-5),
        Case("serving_default", {"images": mixed}, atol=1e-5),
    ]
