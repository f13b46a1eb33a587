"""Decode a TensorBoard event file crl run wrote, against crl's own tfevent.proto, and check it against
metrics.csv: TFRecord framing (each record's masked CRC-32C of its length and of its data), the first
event's file_version, then one Event per metrics.csv row with step = frames and a simple_value per
non-empty column.  Usage: tb_decode.py EVENTS_FILE PROTO_DIR METRICS_CSV WORK_DIR; exit 0 when all holds."""
import csv
import importlib
import math
import os
import struct
import subprocess
import sys
import time


def crc32c(data):
    # bitwise CRC-32C, written apart from crl's table version
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def fail(msg):
    print("tb_decode: " + msg)
    sys.exit(1)


def main():
    events, proto_dir, metrics, work = sys.argv[1:5]
    if crc32c(b"123456789") != 0xE3069283:
        fail("the test's own crc32c is wrong")
    subprocess.run(["protoc", "--python_out=" + work, "-I" + proto_dir, os.path.join(proto_dir, "tfevent.proto")],
                   check=True)
    sys.path.insert(0, work)
    pb = importlib.import_module("tfevent_pb2")
    raw = open(events, "rb").read()
    records, at = [], 0
    while at < len(raw):
        if at + 12 > len(raw):
            fail("a record header is cut at byte %d" % at)
        head = raw[at:at + 8]
        (n,) = struct.unpack("<Q", head)
        (hcrc,) = struct.unpack("<I", raw[at + 8:at + 12])
        if hcrc != masked(head):
            fail("record at byte %d: length crc %08x, want %08x" % (at, hcrc, masked(head)))
        data = raw[at + 12:at + 12 + n]
        if len(data) != n or at + 16 + n > len(raw):
            fail("record at byte %d is cut" % at)
        (dcrc,) = struct.unpack("<I", raw[at + 12 + n:at + 16 + n])
        if dcrc != masked(data):
            fail("record at byte %d: data crc %08x, want %08x" % (at, dcrc, masked(data)))
        ev = pb.Event()
        ev.ParseFromString(data)
        records.append(ev)
        at += 16 + n
    if not records or records[0].WhichOneof("what") != "file_version" or records[0].file_version != "brain.Event:2":
        fail("the first event is not file_version brain.Event:2: %r" % (records[:1],))
    rows = list(csv.DictReader(open(metrics)))
    scalars = records[1:]
    if len(scalars) != len(rows):
        fail("%d summary events for %d metrics.csv rows" % (len(scalars), len(rows)))
    columns = {"train/recent_return": "recent_return", "train/recent_raw_return": "recent_raw_return",
               "train/loss": "loss", "train/episodes": "episodes", "train/optim_steps": "optim_steps",
               "eval/return": "eval_return", "eval/raw_return": "eval_raw_return", "perf/fps": "fps"}
    now, last_wall, checked = time.time(), 0.0, 0
    for ev, row in zip(scalars, rows):
        if ev.WhichOneof("what") != "summary":
            fail("event at step %d holds no summary" % ev.step)
        if ev.step != int(row["frames"]):
            fail("step %d for the row of frame %s" % (ev.step, row["frames"]))
        if not (now - 3600 < ev.wall_time <= now + 60) or ev.wall_time < last_wall:
            fail("wall_time %f out of order or not now" % ev.wall_time)
        last_wall = ev.wall_time
        got = {}
        for v in ev.summary.value:
            if v.WhichOneof("value") != "simple_value":
                fail("tag %s holds no simple_value" % v.tag)
            got[v.tag] = v.simple_value
        for tag, col in columns.items():
            want = row[col]
            if want == "":
                if tag in got:
                    fail("frame %s: %s = %g, but metrics.csv has no %s" % (row["frames"], tag, got[tag], col))
                continue
            if tag not in got:
                fail("frame %s: no %s, metrics.csv has %s = %s" % (row["frames"], tag, col, want))
            w = float(want)
            # metrics.csv keeps 6 significant digits (fps 1 decimal), TensorBoard a float32
            if not math.isclose(got[tag], w, rel_tol=2e-5, abs_tol=0.051 if col == "fps" else 1e-9):
                fail("frame %s: %s = %.9g, metrics.csv %s = %s" % (row["frames"], tag, got[tag], col, want))
            checked += 1
    print("tb_decode: %d records, %d scalars match metrics.csv" % (len(records), checked))


main()
