"""serving.observability.tfrecord: our records are TensorFlow's, both ways, and damage is TF's DATA_LOSS.

TensorFlow (the tf221 oracle venv) reads a file we wrote with ``tf.data.TFRecordDataset`` and
writes one with ``tf.io.TFRecordWriter`` that we read; the records must be equal.
"""

from __future__ import annotations

import io
import json
import subprocess
import textwrap

import pytest

from runtime import errors
from serving.observability import tfrecord
from tests.apis.oracle_env import oracle_python

RECORDS = [b"", b"a", b"\x00\xff" * 300, bytes(range(256))]


def read_all(data: bytes) -> list[bytes]:
    return list(tfrecord.read_records(io.BytesIO(data), len(data)))


def test_round_trip():
    assert read_all(b"".join(map(tfrecord.encode_record, RECORDS))) == RECORDS
    assert read_all(b"") == []


@pytest.mark.parametrize(
    "damage, message",
    [
        (lambda d: d[:5], "truncated record at 0 (Is this even a TFRecord file?)"),
        (lambda d: d[:-1], "truncated record at 17"),  # the second record's footer cut
        (lambda d: d[:22], "truncated record at 17"),  # the second record's header cut
        (lambda d: d[:3] + b"\x99" + d[4:], "corrupted record at 0 (Is this even a TFRecord file?)"),
        (lambda d: d[:12] + b"b" + d[13:], "corrupted record at 12"),  # data of record 0
        (lambda d: b"not a tfrecord file at all", "corrupted record at 0 (Is this even a TFRecord file?)"),
    ],
)
def test_damage_is_data_loss(damage, message):
    data = tfrecord.encode_record(b"a") + tfrecord.encode_record(b"bc")
    with pytest.raises(errors.DataLossError) as info:
        read_all(damage(data))
    assert info.value.message == message


def test_a_huge_length_is_refused_before_anything_is_allocated():
    forged = bytearray(tfrecord.encode_record(b"a"))
    length = (2**62).to_bytes(8, "little")
    from runtime.checkpoint.table import crc32c, mask_crc

    forged[:12] = length + mask_crc(crc32c(length)).to_bytes(4, "little")
    with pytest.raises(errors.DataLossError, match="truncated record at 0"):
        read_all(bytes(forged))


TF_SCRIPT = textwrap.dedent(
    """
    import json, sys
    import tensorflow as tf
    ours, theirs = sys.argv[1], sys.argv[2]
    read = [r.numpy().hex() for r in tf.data.TFRecordDataset(ours)]
    with tf.io.TFRecordWriter(theirs) as w:
        for record in json.loads(sys.argv[3]):
            w.write(bytes.fromhex(record))
    print(json.dumps(read))
    """
)


def test_tensorflow_reads_ours_and_we_read_theirs(tmp_path):
    ours, theirs = tmp_path / "ours.tfrecord", tmp_path / "theirs.tfrecord"
    ours.write_bytes(b"".join(map(tfrecord.encode_record, RECORDS)))
    result = subprocess.run(
        [
            str(oracle_python("tf221")),
            "-c",
            TF_SCRIPT,
            str(ours),
            str(theirs),
            json.dumps([r.hex() for r in RECORDS]),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert [bytes.fromhex(r) for r in json.loads(result.stdout.splitlines()[-1])] == RECORDS
    assert read_all(theirs.read_bytes()) == RECORDS
