#!/usr/bin/env python3
"""Reads a PNG screenshot (8-bit RGB or RGBA, not interlaced, as headless Chromium writes them)
and prints a JSON object: the share of its pixels that are not near white, and for each colour
NAME=R,G,B given on the command line, the share of pixels within 12 of it on every channel.

Usage: png_colours.py SCREENSHOT.png [NAME=R,G,B ...]
"""
import json
import struct
import sys
import zlib


def pixels(path):
    with open(path, "rb") as png:
        data = png.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise SystemExit(f"{path} is not a PNG")
    position, idat, header = 8, b"", None
    while position < len(data):
        length, kind = struct.unpack(">I4s", data[position:position + 8])
        body = data[position + 8:position + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        position += 12 + length
    width, height, depth, colour_type, _, _, interlace = header
    if depth != 8 or colour_type not in (2, 6) or interlace:
        raise SystemExit(f"{path}: unsupported PNG (depth {depth}, colour type {colour_type}, interlace {interlace})")
    channels = 3 if colour_type == 2 else 4
    raw, stride = zlib.decompress(idat), width * channels
    previous, rows = bytearray(stride), []
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for x in range(stride):
            left = line[x - channels] if x >= channels else 0
            up, up_left = previous[x], previous[x - channels] if x >= channels else 0
            if kind == 1:
                line[x] = (line[x] + left) & 0xFF
            elif kind == 2:
                line[x] = (line[x] + up) & 0xFF
            elif kind == 3:
                line[x] = (line[x] + (left + up) // 2) & 0xFF
            elif kind == 4:
                estimate = left + up - up_left
                pa, pb, pc = abs(estimate - left), abs(estimate - up), abs(estimate - up_left)
                line[x] = (line[x] + (left if pa <= pb and pa <= pc else up if pb <= pc else up_left)) & 0xFF
        rows.append(line)
        previous = line
    for line in rows:
        for x in range(0, stride, channels):
            yield line[x], line[x + 1], line[x + 2]


def main():
    wanted = {}
    for argument in sys.argv[2:]:
        name, rgb = argument.split("=")
        wanted[name] = tuple(int(value) for value in rgb.split(","))
    total, ink, near = 0, 0, dict.fromkeys(wanted, 0)
    for pixel in pixels(sys.argv[1]):
        total += 1
        ink += min(pixel) < 240
        for name, colour in wanted.items():
            near[name] += all(abs(a - b) <= 12 for a, b in zip(pixel, colour))
    print(json.dumps({"ink": ink / total, **{name: count / total for name, count in near.items()}}))


if __name__ == "__main__":
    main()
