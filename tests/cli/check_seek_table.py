#!/usr/bin/env python3
# Independent check of an archive's seek table against the bytes on disk (no lazycache code):
# footer and skippable magics, every data frame starts with the zstd magic and carries a
# Frame_Content_Size equal to its seek-table entry, each frame decompresses alone (zstd -d) to
# that many bytes, and the concatenation equals `zstd -dc` of the whole archive.
# Usage: check_seek_table.py ARCHIVE   (prints the number of data frames)
import struct, subprocess, sys

def frame_content_size(b):
    fhd = b[4]
    fcs_flag, single, dict_flag = fhd >> 6, (fhd >> 5) & 1, fhd & 3
    pos = 5 + (0 if single else 1) + [0, 1, 2, 4][dict_flag]
    size = [1 if single else 0, 2, 4, 8][fcs_flag]
    if size == 0:
        return None
    v = int.from_bytes(b[pos:pos + size], "little")
    return v + 256 if size == 2 else v

data = open(sys.argv[1], "rb").read()
n, desc, magic = struct.unpack("<IBI", data[-9:])
assert magic == 0x8F92EAB1, "footer magic"
assert desc & 0x80 and not desc & 0x7C, "descriptor"
table_size = 8 + n * 12 + 9
table = data[-table_size:]
assert struct.unpack("<I", table[:4])[0] == 0x184D2A5E, "seek table skippable magic"
assert struct.unpack("<I", table[4:8])[0] + 8 == table_size, "seek table frame size"
entries = [struct.unpack("<III", table[8 + 12 * i: 20 + 12 * i]) for i in range(n)]
assert sum(c for c, _, _ in entries) + table_size == len(data), "sizes sum to the object size"
off, joined = 0, b""
for i, (c, d, _) in enumerate(entries):
    frame = data[off:off + c]
    magic = struct.unpack("<I", frame[:4])[0]
    if i == n - 1:
        assert d == 0 and 0x184D2A50 <= magic <= 0x184D2A5F and magic != 0x184D2A5E, "index frame is skippable"
    else:
        assert magic == 0xFD2FB528, f"frame {i} zstd magic"
        assert frame_content_size(frame) == d, f"frame {i} Frame_Content_Size"
        out = subprocess.run(["zstd", "-dc"], input=frame, capture_output=True, check=True).stdout
        assert len(out) == d, f"frame {i} decompresses to its size"
        joined += out
    off += c
whole = subprocess.run(["zstd", "-dc", sys.argv[1]], capture_output=True, check=True).stdout
assert whole == joined, "frames concatenate to the whole stream"
print(n - 1)
