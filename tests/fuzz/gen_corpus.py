#!/usr/bin/env python3
"""gen_corpus.py — writes the seed corpus of the fuzz harnesses into tests/fuzz/corpus/.

Each seed is a small valid or nearly valid input in the layout its harness reads (see the
top comment of fuzz_<reader>.c); crash reproducers (crash-*) are committed by hand next to
them and are left alone here. Run it again after changing a harness's input layout:

    /usr/bin/python3 tests/fuzz/gen_corpus.py
"""
import gzip
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def put(reader, name, data):
    d = os.path.join(HERE, "corpus", reader)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def gz(data):
    return gzip.compress(data, mtime=0)


# ---- IDX: flag byte, little-endian image-file length, image file, label file ----------
def idx_images(n, rows, cols, pixels):
    return struct.pack(">IIII", 0x803, n, rows, cols) + bytes(pixels)


def idx_labels(labels):
    return struct.pack(">II", 0x801, len(labels)) + bytes(labels)


def idx_input(flags, images, labels):
    return bytes([flags]) + struct.pack("<I", len(images)) + images + labels


def idx_seeds():
    ten = 10 << 4  # num_classes 10 in the flag's high bits
    # 3 samples of 2x2: margins, a full row, an empty sample.
    images = idx_images(3, 2, 2, [0, 7, 255, 1, 9, 0, 0, 0, 0, 0, 0, 0])
    labels = idx_labels([0, 1, 9])
    put("idx", "valid-3x2x2", idx_input(ten, images, labels))
    put("idx", "valid-3x2x2-gzip-here", idx_input(ten | 3, images, labels))
    put("idx", "valid-3x2x2-gzip-input", idx_input(ten, gz(images), gz(labels)))
    put("idx", "valid-3x2x2-dir", idx_input(ten | 4, images, labels))
    put("idx", "valid-3x2x2-dir-gz-names", idx_input(ten | 4 | 8 | 3, images, labels))
    # Rows wider than 255 pixels are kept unpacked.
    wide = idx_images(2, 1, 300, [(i * 7) % 256 for i in range(600)])
    put("idx", "valid-wide-unpacked", idx_input(ten, wide, idx_labels([3, 4])))
    # A row of 40 pixels with spans longer than one 8-byte word, and a lone last pixel.
    long_rows = idx_images(2, 2, 40, [0] * 3 + list(range(1, 30)) + [0] * 8 + [0] * 39 + [5]
                           + [0] * 80)
    put("idx", "valid-long-spans", idx_input(ten, long_rows, idx_labels([1, 2])))
    put("idx", "bad-truncated", idx_input(ten, images[:-1], labels))
    put("idx", "bad-trailing", idx_input(ten, images + b"\0", labels))
    put("idx", "bad-label-range", idx_input(ten, images, idx_labels([0, 10, 1])))
    put("idx", "bad-count", idx_input(ten, images, idx_labels([0, 1])))
    put("idx", "bad-magic", idx_input(ten, labels, images))
    put("idx", "bad-gzip-cut", idx_input(ten, gz(images)[:-6], gz(labels)))


# ---- CSV: option byte, num_classes byte, file ------------------------------------------
def csv_input(header, labels, targets, delim, text, num_classes=0):
    bits = header | (4 if labels else 0) | (targets << 3) | (delim << 6)
    return bytes([bits, num_classes]) + text.encode()


def csv_seeds():
    put("csv", "regression-header", csv_input(2, 0, 0, 0, "a,b,c\n1,2,3\n4.5,-5e-3,6\n"))
    put("csv", "labels", csv_input(2, 1, 0, 0, "0.5,0.25,1\n0.1,0.2,0\n3e-1,-2,2.0\n"))
    put("csv", "labels-first-column", csv_input(0, 1, 1, 0, "2,1,1\n0,3,4\n1,5,9\n", 3))
    put("csv", "bom-crlf-semicolon",
        csv_input(1, 0, 4, 1, "\ufeffx;y;z\r\n1;2;3\r\n4;5;6\r\n\r\n"))
    put("csv", "quoted-header", csv_input(2, 0, 0, 0, '"x","y ""q""",z\n1,2,3\n'))
    put("csv", "tabs-two-targets", csv_input(0, 0, 6, 2, "1\t 2\t3\n 4\t5\t6 \n7\t8\t9\n"))
    put("csv", "space-delimiter", csv_input(0, 0, 3, 3, "1 2 3 4\n5 6 7 8\n"))
    put("csv", "bad-ragged", csv_input(2, 0, 0, 0, "1,2,3\n4,5\n"))
    put("csv", "bad-empty-line", csv_input(2, 0, 0, 0, "1,2\n\n3,4\n"))
    put("csv", "bad-overflow", csv_input(2, 0, 0, 0, "1,2\n1e39,4\n"))
    put("csv", "bad-label", csv_input(2, 1, 0, 0, "1,2.5\n", 4))


# ---- config: the INI file, then NUL-separated --set assignments ------------------------
def config_seeds():
    for name in ("mlp", "convnet", "linreg"):
        with open(os.path.join(ROOT, "examples", name + ".ini"), "rb") as f:
            put("config", "example-" + name, f.read())
    put("config", "csv-continuation",
        b"[data]\nkind = csv\ntrain_file = \"t.csv\"\ncsv_targets = 0,\n  -1\n"
        b"[model]\nlayers =\n    fc1: linear 8,\n    relu, dropout 0.1,\n"
        b"    linear 2 bias=off\n[loss]\nkind = mse\n")
    put("config", "with-set",
        b"train.epochs = 3\n[optim]\nkind = sgd\nmomentum = 0.9\n\0optim.kind=adamw\0"
        b"model.layers=conv2d 4 3 stride=2 padding=1, maxpool2d 2, flatten, linear 10\0"
        b"parallel.last_batch = pad\0")
    put("config", "bad-unknown-key", b"[optim]\nlrr = 0.1\n")
    put("config", "bad-section", b"[dataa]\nkind = idx\n[train\n")
    put("config", "bad-long-line", b"[model]\nlayers = " + b"relu, " * 40 + b"relu\n")
    put("config", "bad-check", b"[train]\nbatch = 1\n[optim]\nkind = sgd\nnesterov = on\n")


# ---- safetensors ------------------------------------------------------------------------
def safetensors(tensors, meta=None, pad=True):
    """tensors: list of (name, dtype, shape, raw bytes), written in that order."""
    header, blobs, at = {}, [], 0
    if meta:
        header["__metadata__"] = meta
    for name, dtype, shape, raw in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def safetensors_seeds():
    f32 = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
    put("safetensors", "valid-two-f32",
        safetensors([("fc.weight", "F32", [2, 2], f32[:16]), ("fc.bias", "F32", [2], f32[16:])],
                    {"format": "pt"}))
    put("safetensors", "valid-dtypes",
        safetensors([("d", "F64", [1], struct.pack("<d", 0.5)),
                     ("i", "I32", [2], struct.pack("<2i", -1, 7)),
                     ("l", "I64", [], struct.pack("<q", 3)), ("u", "U8", [3], b"\1\2\3"),
                     ("e", "F32", [0, 4], b"")], pad=False))
    put("safetensors", "valid-empty", safetensors([]))
    put("safetensors", "valid-escaped-name",
        safetensors([("a\"\\\u00e9\u2603", "U8", [1], b"x")], {"k": "v\n"}))
    overlap = (b'{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},'
               b'"b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}')
    put("safetensors", "bad-overlap", struct.pack("<Q", len(overlap)) + overlap + b"xy")
    put("safetensors", "bad-shape-size",
        safetensors([("w", "F32", [3], f32[:8])]))
    put("safetensors", "bad-header-length", struct.pack("<Q", 1 << 40) + b"{}")


if __name__ == "__main__":
    idx_seeds()
    csv_seeds()
    config_seeds()
    safetensors_seeds()
