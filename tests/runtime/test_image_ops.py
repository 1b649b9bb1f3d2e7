"""Image kernels against TensorFlow 2.21: the records and the SavedModel of ``image_models``.

``tests/oracle/builders/image_records.py`` ran every record through ``tf.raw_ops`` and exported a
decode -> resize -> conv model. Decoding is exact (JPEG with every DCT method and upsampling,
PNG, BMP, GIF, WebP), but for the documented deviations (OPS.md): 16-bit colour PNGs (high byte exact)
and DecodeAndCropJpeg (the window's last column). Encoders are judged by what their bytes decode to.
"""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from apis.tensorflow.core.framework import tensor_pb2
from loader import load_saved_model
from runtime import dtypes, errors
from runtime.kernels import load_all
from runtime.tensor_util import make_ndarray
from tests.oracle import catalog, corpus

KERNELS = load_all()  # the whole registry: these tests call kernels by op type

MODEL = "image_models"
# Pillow reads 16-bit colour PNGs through 8 bits: the high byte is exact, the low byte is lost.
HIGH_BYTE_ONLY = {"png_rgb16_png_uint16"}
DTYPES = {
    "uint8": dtypes.DT_UINT8,
    "uint16": dtypes.DT_UINT16,
    "float32": dtypes.DT_FLOAT,
    "int64": dtypes.DT_INT64,
}


@functools.cache
def _manifest() -> dict:
    (entry,) = [e for e in catalog.discover() if e.name == MODEL]
    return corpus.check_current(entry)


@functools.cache
def _records() -> dict:
    return json.loads((_manifest()["dir"] / "records.json").read_text())["records"]


def _names() -> list[str]:
    try:
        return sorted(_records())
    except AssertionError:
        return ["<oracle cache missing>"]  # fails below with the command to build it


def _read(relative: str) -> np.ndarray:
    path = _manifest()["dir"] / "records" / relative
    return make_ndarray(tensor_pb2.TensorProto.FromString(path.read_bytes()))


def _run(entry: dict):
    attrs = {k: DTYPES[v["dtype"]] if isinstance(v, dict) else v for k, v in entry["attrs"].items()}
    result = KERNELS[entry["op"]].fn(*[_read(p) for p in entry["inputs"]], **attrs)
    return list(result) if isinstance(result, tuple) else [result]


def _decode(data) -> np.ndarray:
    return KERNELS["DecodeImage"].fn(np.array(data, dtype=object), expand_animations=False)


@pytest.mark.parametrize("name", _names())
def test_record_matches_tensorflow(name):
    entry = _records()[name]
    if "error" in entry:
        with pytest.raises(errors.OpError) as info:
            _run(entry)
        assert type(info.value).__name__ == entry["error"]["class"]
        assert info.value.message == entry["error"]["message"]
        return
    ours, theirs = _run(entry), [_read(p) for p in entry["outputs"]]
    assert len(ours) == len(theirs)
    for got, want in zip(ours, theirs):
        got = np.asarray(got)
        if entry["op"].startswith("Encode"):  # bytes differ; what they decode to must not
            _check_encoded(entry, got, want)
            continue
        assert (got.shape, got.dtype) == (want.shape, want.dtype), name
        if name in HIGH_BYTE_ONLY:
            np.testing.assert_array_equal(got >> 8, want >> 8, err_msg=name)
        elif entry["op"] == "DecodeAndCropJpeg":  # exact but for the window's last column
            np.testing.assert_array_equal(got[:, :-1], want[:, :-1], err_msg=name)
            assert np.abs(got.astype(int) - want.astype(int)).max() <= entry["atol"], name
        elif got.dtype.kind in "fc" or entry["atol"]:
            np.testing.assert_allclose(got, want, rtol=0, atol=entry["atol"] or 0, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name)


def _check_encoded(entry: dict, ours: np.ndarray, tf_bytes: np.ndarray) -> None:
    picture = _read(entry["inputs"][0])
    mine, theirs = _decode(ours[()]), _decode(tf_bytes[()])
    if entry["op"] == "EncodePng":
        np.testing.assert_array_equal(mine[..., : picture.shape[-1]], picture)
        np.testing.assert_array_equal(theirs[..., : picture.shape[-1]], picture)
    else:  # same quality tables and subsampling: the two JPEGs decode within a level or two
        assert mine.shape == theirs.shape
        assert np.abs(mine.astype(int) - theirs.astype(int)).max() <= 2


def test_records_cover_every_codec_op():
    ops = {entry["op"] for entry in _records().values()}
    decoders = {"DecodeJpeg", "DecodeAndCropJpeg", "DecodePng", "DecodeGif", "DecodeBmp", "DecodeWebP"}
    assert decoders | {"DecodeImage", "EncodePng", "EncodeJpeg", "ExtractJpegShape"} <= ops


def test_saved_model_decodes_resizes_and_convolves_as_tensorflow():
    manifest = _manifest()
    bundle = load_saved_model(manifest["export_path"], {"serve"}, delegation=False)
    try:
        assert bundle.unavailable_signatures == {}
        for case in manifest["cases"]:
            signature = bundle.signature_defs[case["signature"]]
            feeds = {signature.inputs[k].name: _case_tensor(manifest, p) for k, p in case["inputs"].items()}
            fetches = {k: signature.outputs[k].name for k in case["outputs"]}
            got = bundle.session.run(fetches, feeds)
            for key, path in case["outputs"].items():
                np.testing.assert_allclose(
                    got[key],
                    _case_tensor(manifest, path),
                    rtol=case["rtol"],
                    atol=case["atol"],
                    err_msg=f"{case['signature']}:{key}",
                )
    finally:
        bundle.close()


def _case_tensor(manifest: dict, relative: str) -> np.ndarray:
    return make_ndarray(tensor_pb2.TensorProto.FromString((manifest["dir"] / relative).read_bytes()))


# -- TF's argument checks, without the oracle --------------------------------------------------


def test_contents_must_be_a_scalar():
    with pytest.raises(errors.InvalidArgumentError, match=r"contents must be scalar, got shape \[2\]"):
        KERNELS["DecodePng"].fn(np.array([b"a", b"b"], dtype=object))


def test_jpeg_ratio_must_be_a_power_of_two_up_to_8():
    with pytest.raises(errors.InvalidArgumentError, match="ratio must be 1, 2, 4, or 8, got 3"):
        KERNELS["DecodeJpeg"].fn(np.array(b"\xff\xd8\xff", dtype=object), ratio=3)


def test_png_round_trips_through_our_encoder_and_decoder():
    picture = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3)
    encoded = KERNELS["EncodePng"].fn(picture)
    np.testing.assert_array_equal(KERNELS["DecodePng"].fn(encoded), picture)
    np.testing.assert_array_equal(
        KERNELS["DecodeImage"].fn(encoded, dtype=dtypes.DT_FLOAT), picture / np.float32(255)
    )


@pytest.mark.parametrize(
    "shape, dtype", [((3, 4, c), np.uint8) for c in (1, 2, 3, 4)] + [((3, 4, 1), np.uint16)]
)
def test_png_encoding_is_lossless_at_every_depth(shape, dtype):
    picture = np.random.default_rng(0).integers(0, np.iinfo(dtype).max + 1, shape).astype(dtype)
    encoded = KERNELS["EncodePng"].fn(picture)
    out_dtype = dtypes.DT_UINT16 if dtype == np.uint16 else dtypes.DT_UINT8
    np.testing.assert_array_equal(KERNELS["DecodePng"].fn(encoded, dtype=out_dtype), picture)


def test_bmp_channels_must_match_the_file():
    picture = np.zeros((2, 3, 3), np.uint8)
    header = b"BM" + (0).to_bytes(8, "little") + (54).to_bytes(4, "little") + (40).to_bytes(4, "little")
    dims = (3).to_bytes(4, "little") + (2).to_bytes(4, "little", signed=True) + (1).to_bytes(2, "little")
    data = header + dims + (24).to_bytes(2, "little") + bytes(24) + bytes(12 * 2)
    assert KERNELS["DecodeBmp"].fn(np.array(data, dtype=object)).shape == picture.shape
    with pytest.raises(errors.InvalidArgumentError, match="does not match bits per pixel"):
        KERNELS["DecodeBmp"].fn(np.array(data, dtype=object), channels=4)
