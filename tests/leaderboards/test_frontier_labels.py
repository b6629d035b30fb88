"""The label placer (labels.py) in pure Python: what it returns never overlaps, stays in the frame, and
gives up (None) rather than overlap. The browser test checks the same on the boxes Chromium draws."""

from __future__ import annotations

import random

from dare.leaderboards.labels import CHAR_WIDTH, LabelPlacer, intersects, leader_end, text_width


def test_placed_labels_are_disjoint_inside_the_frame_and_off_the_markers():
    rng = random.Random(7)
    frame = (58.0, 30.0, 506.0, 294.0)
    markers = [(rng.uniform(300, 360), rng.uniform(120, 170)) for _ in range(30)]  # a tight cluster
    obstacles = [(x - 6, y - 6, x + 6, y + 6) for x, y in markers]
    placer = LabelPlacer(frame, obstacles)
    placed = [placer.place(f"strategy {i} · threshold 0.{i:02d}", x, y) for i, (x, y) in enumerate(markers)]
    boxes = [label.box for label in placed if label]
    assert len(boxes) >= 15  # most find a spot, many of them away from their marker
    assert sum(label.leader for label in placed if label) >= 5
    for i, box in enumerate(boxes):
        assert frame[0] <= box[0] and box[2] <= frame[2] and frame[1] <= box[1] and box[3] <= frame[3]
        assert not any(intersects(box, marker, gap=0) for marker in obstacles)
        assert not any(intersects(box, other, gap=0) for other in boxes[i + 1:])


def test_a_full_frame_gives_no_spot_instead_of_an_overlap():
    placer = LabelPlacer((0.0, 0.0, 120.0, 20.0), [])
    assert placer.place("abcdefghijklmno", 10, 10) is not None  # 15 x 6.9 = 103.5 px fits once
    assert placer.place("abcdefghijklmno", 10, 10) is None


def test_widths_and_leader_ends():
    assert text_width("abc") == 3 * CHAR_WIDTH and text_width("漢") == 2 * CHAR_WIDTH
    assert leader_end((10.0, 10.0, 50.0, 20.0), 0.0, 15.0) == (10.0, 15.0)  # nearest point of the box
    assert not intersects((0, 0, 10, 10), (12, 0, 20, 10)) and intersects((0, 0, 10, 10), (10.5, 0, 20, 10))
