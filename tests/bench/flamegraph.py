#!/usr/bin/python3
"""Draws a flame graph (SVG) from folded stacks.

Input lines are "frame;frame;...;frame COUNT" (outermost frame first), as
tests/bench/profile.sh writes them from `perf script`. Each frame is a box as
wide as the samples it was on the stack for; boxes stack upwards from the
outermost frame. Hovering a box shows its name, samples and share.

    tests/bench/flamegraph.py --title "orchestrator, 64 streams" < orch.folded > orch.svg
"""
import argparse
import html
import sys
import zlib

WIDTH = 1200
ROW = 16
MIN_WIDTH = 0.3  # Narrower boxes are left out (they would not be seen).


def parse(lines):
    root = {"name": "all", "count": 0, "children": {}}
    for line in lines:
        line = line.rstrip("\n")
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        node = root
        node["count"] += n
        for frame in stack.split(";"):
            node = node["children"].setdefault(frame, {"name": frame, "count": 0, "children": {}})
            node["count"] += n
    return root


def depth(node):
    return 1 + max((depth(c) for c in node["children"].values()), default=0)


def color(name):
    # Stable per name: warm colours, like the usual flame graphs.
    h = zlib.crc32(name.encode())
    return "rgb(%d,%d,%d)" % (205 + h % 50, 80 + (h >> 8) % 130, (h >> 16) % 55)


def boxes(node, x, level, scale, total, out):
    width = node["count"] * scale
    if width < MIN_WIDTH:
        return
    out.append((x, level, width, node, total))
    child_x = x
    for child in sorted(node["children"].values(), key=lambda c: c["name"]):
        boxes(child, child_x, level + 1, scale, total, out)
        child_x += child["count"] * scale


def render(root, title):
    total = max(root["count"], 1)
    levels = depth(root)
    height = (levels + 2) * ROW
    out = []
    boxes(root, 0.0, 0, WIDTH / total, total, out)
    svg = [
        '<?xml version="1.0" standalone="no"?>',
        '<svg version="1.1" width="%d" height="%d" xmlns="http://www.w3.org/2000/svg" '
        'font-family="monospace" font-size="11">' % (WIDTH, height),
        '<rect width="100%%" height="100%%" fill="white"/>',
        '<text x="4" y="%d">%s (%d samples)</text>' % (ROW - 4, html.escape(title), total),
    ]
    for x, level, width, node, total in out:
        y = height - (level + 1) * ROW
        name = html.escape(node["name"])
        share = 100.0 * node["count"] / total
        svg.append('<g><title>%s: %d samples (%.2f%%)</title>' % (name, node["count"], share))
        svg.append('<rect x="%.2f" y="%d" width="%.2f" height="%d" fill="%s" stroke="white" '
                   'stroke-width="0.3"/>' % (x, y, width, ROW - 1, color(node["name"])))
        chars = int(width / 7)
        if chars >= 3:
            label = node["name"] if len(node["name"]) <= chars else node["name"][:chars - 2] + ".."
            svg.append('<text x="%.2f" y="%d">%s</text>' % (x + 2, y + ROW - 4, html.escape(label)))
        svg.append('</g>')
    svg.append('</svg>')
    return "\n".join(svg) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--title", default="flame graph")
    args = parser.parse_args()
    sys.stdout.write(render(parse(sys.stdin), args.title))


if __name__ == "__main__":
    main()
