"""The head: a sculpted ellipsoid skin with a lip seam, mouth cavity, teeth, tongue, eyes, lids,
brows, ears and a hair cap. Built symmetric about x = 0 (left parts built, right parts mirrored).
"""

from __future__ import annotations

import numpy as np

from .geometry import Part, cap_faces, grid_faces, loft, one_joint, outward, smoothstep
from .palette import COLORS

CENTRE = np.array([0.0, 1.592, 0.004])
SEMI_AXES = np.array([0.078, 0.118, 0.096])
MOUTH_Y = 1.513
MOUTH_HALF_WIDTH = 0.025
LIP_HALF_WIDTH = 0.029
EYE_RADIUS = 0.0156
EYE_X, EYE_Y = 0.0325, 1.592
LOWER_FACE_SCALE = 1.0  # the lower half reaches as far down as the cranium goes up: room for a real chin
HEAD_BOTTOM_Y = CENTRE[1] - LOWER_FACE_SCALE * SEMI_AXES[1]
UPPER_LID_RADIUS = 1.13 * EYE_RADIUS
LOWER_LID_RADIUS = 1.11 * EYE_RADIUS
LID_SPAN = 1.25
LID_TOP = 1.30
COLUMNS, ROWS = 120, 104


def _direction(phi: np.ndarray, polar: np.ndarray) -> np.ndarray:
    return np.stack([np.sin(polar) * np.sin(phi), np.cos(polar), np.sin(polar) * np.cos(phi)], -1)


def base_surface(phi: np.ndarray, polar: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Undisplaced head surface (points, unit normals): an ellipsoid with the lower face pushed forward."""
    d = _direction(phi, polar)
    squareness = 2.0 + 0.35 * smoothstep(0.1, 0.8, -d[..., 1])  # a rounder, fuller jaw than the egg's
    d = d / (np.abs(d) ** squareness[..., None]).sum(axis=-1, keepdims=True) ** (1 / squareness[..., None])
    semi_axes = SEMI_AXES * np.where(d[..., 1:2] < 0, [1.0, LOWER_FACE_SCALE, 1.0], 1.0)
    points = CENTRE + semi_axes * d
    normals = d / semi_axes
    normals /= np.linalg.norm(normals, axis=-1, keepdims=True)
    front = np.clip(np.cos(phi), 0, None) ** 1.3 * np.clip(np.sin(polar), 0, None)
    lower_face = smoothstep(1.60, 1.53, points[..., 1]) * smoothstep(HEAD_BOTTOM_Y - 0.006, HEAD_BOTTOM_Y + 0.020, points[..., 1])
    points[..., 2] += 0.010 * front * lower_face
    # a chin that faces forward (and catches the light) instead of curving under like the egg it was cut from
    # and that keeps its front nearly upright below the lip (the egg falls back there) before it rounds under
    chin = smoothstep(1.530, 1.504, points[..., 1]) * smoothstep(HEAD_BOTTOM_Y, HEAD_BOTTOM_Y + 0.010, points[..., 1])
    upright = 0.026 + 0.6 * np.clip(1.504 - points[..., 1], 0, None)
    points[..., 2] += upright * np.clip(np.cos(phi), 0, None) ** 4 * chin
    narrow = smoothstep(1.56, 1.47, points[..., 1])
    points[..., 0] *= 1.0 - 0.08 * narrow
    return points, normals


def _bump2(q: np.ndarray, cx: float, cy: float, rx: float, ry: float, mirrored: bool = False) -> np.ndarray:
    """Compact 2-D falloff in the face plane (x, y); `mirrored` adds the twin at -cx."""
    def one(x0):
        d2 = ((q[..., 0] - x0) / rx) ** 2 + ((q[..., 1] - cy) / ry) ** 2
        return np.clip(1 - d2, 0, None) ** 2
    return one(cx) + one(-cx) if mirrored else one(cx)


def nose_relief(q: np.ndarray) -> np.ndarray:
    """A stylized nose: a narrow bridge ridge that catches the light, a rounded tip, small wings, an underside
    that tucks back (so the nostrils face down, out of sight from the front)."""
    x, y = q[..., 0], q[..., 1]
    along = smoothstep(1.590, 1.551, y)  # 0 between the eyes, 1 at the tip
    ridge_width = 0.0042 + 0.0040 * along
    span = smoothstep(1.535, 1.548, y) * smoothstep(1.600, 1.586, y)
    ridge = (0.0008 + 0.0094 * along ** 1.6) * span * np.exp(-((x / ridge_width) ** 2))
    return (
        ridge
        + 0.0058 * _bump2(q, 0.0, 1.5500, 0.0072, 0.0068)
        + 0.0030 * _bump2(q, 0.0082, 1.5455, 0.0052, 0.0048, mirrored=True)
        - 0.0010 * _bump2(q, 0.0132, 1.5475, 0.0026, 0.0060, mirrored=True)
        - 0.0030 * _bump2(q, 0.0, 1.5405, 0.0090, 0.0032)
    )


def face_relief(q: np.ndarray, normals: np.ndarray) -> np.ndarray:
    """Displacement along the normal that sculpts sockets, nose, lips, chin and cheeks."""
    front = smoothstep(0.15, 0.45, normals[..., 2])
    relief = (
        -0.0075 * _bump2(q, EYE_X, EYE_Y, 0.021, 0.016, mirrored=True)
        + 0.0030 * _bump2(q, EYE_X, EYE_Y + 0.022, 0.030, 0.011, mirrored=True)
        + nose_relief(q)
        - 0.0008 * _bump2(q, 0.0, MOUTH_Y + 0.016, 0.012, 0.006)
        + 0.0044 * _bump2(q, 0.0, MOUTH_Y + 0.0055, 0.031, 0.0085)
        + 0.0032 * _bump2(q, 0.0, MOUTH_Y - 0.0060, 0.027, 0.0080)
        - 0.0012 * _bump2(q, 0.0, MOUTH_Y, 0.030, 0.0022)
        - 0.0030 * _bump2(q, 0.027, MOUTH_Y, 0.007, 0.007, mirrored=True)
        - 0.0012 * _bump2(q, 0.0, MOUTH_Y - 0.0135, 0.020, 0.004)
        + 0.0065 * _bump2(q, 0.0, HEAD_BOTTOM_Y + 0.008, 0.026, 0.016)
        + 0.0045 * _bump2(q, 0.043, 1.550, 0.028, 0.026, mirrored=True)
    )
    return relief * front


def _column_angles() -> np.ndarray:
    s = -np.pi + 2 * np.pi * np.arange(COLUMNS // 2 + 1) / COLUMNS
    half = s - 0.68 * np.sin(s)
    return np.concatenate([half, -half[1:COLUMNS // 2][::-1]])


def _row_angles() -> np.ndarray:
    fine = np.linspace(0, np.pi, 4001)
    density = (1.0 + 2.6 * np.exp(-(((fine - 2.05) / 0.62) ** 2)) - 0.4 * np.exp(-((fine / 0.5) ** 2))
               + 2.4 * np.exp(-(((fine - 2.40) / 0.10) ** 2)))  # extra rings at the lips: a clean red edge
    cumulative = np.concatenate([[0], np.cumsum((density[1:] + density[:-1]) / 2)])
    cumulative /= cumulative[-1]
    return np.interp(np.linspace(0, 1, ROWS + 2)[1:-1], cumulative, fine)


def lip_border(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Heights above and below the mouth line of the vermilion border: a cupid's bow up top, a fuller lower lip."""
    x = np.abs(x)
    width = np.sqrt(np.clip(1 - (x / LIP_HALF_WIDTH) ** 2, 0, 1))
    bow = 1.0 - 0.20 * np.exp(-((x / 0.0032) ** 2)) + 0.12 * np.exp(-(((x - 0.0068) / 0.0045) ** 2))
    return 0.0080 * width * bow, 0.0098 * width ** 0.8


# rows of the skin grid, counted from the mouth line, that are laid exactly along the lips' edges
UPPER_LIP_ROWS = (0.0, 0.34, 0.64, 0.86, 0.97)  # fractions of the upper lip's height; the last one sits on the border
LOWER_LIP_ROWS = (0.0, 0.30, 0.56, 0.76, 0.90, 0.97)
OUTSIDE_BORDER, BORDER_GAP = 1.03, 1e-4  # the first skin row just past the border: a crisp colour edge
UPPER_BLEND_ROWS, LOWER_BLEND_ROWS = 4, 6


def _surface(phi: np.ndarray, polar: np.ndarray) -> np.ndarray:
    base, normals = base_surface(phi, polar)
    return base + normals * face_relief(base, normals)[..., None]


def _polar_at_heights(phi: float, heights: np.ndarray) -> np.ndarray:
    """Polar angles (down the front of column `phi`) where the skin reaches each height."""
    fine = np.linspace(1.9, 2.9, 2001)
    y = np.minimum.accumulate(_surface(np.full_like(fine, phi), fine)[:, 1])
    return np.interp(-np.asarray(heights), -y, fine)


def _lip_aligned_rows(phi: np.ndarray, polar: np.ndarray) -> tuple[np.ndarray, int]:
    """Move the rows around the mouth so the mouth line and both lip borders run exactly along rows.

    Per-vertex colour then changes across one thin row of triangles: a clean red edge, no blotches.
    Returns the new polar grid and the mouth-line row.
    """
    front_column = COLUMNS // 2
    heights = _surface(phi, polar)[..., 1]
    seam_row = int(np.argmin(np.abs(heights[:, front_column] - MOUTH_Y)))
    top = seam_row - len(UPPER_LIP_ROWS) - UPPER_BLEND_ROWS
    bottom = seam_row + len(LOWER_LIP_ROWS) + LOWER_BLEND_ROWS
    polar = polar.copy()
    for column in range(COLUMNS):
        if np.cos(phi[0, column]) < 0.5:
            continue
        x = _surface(phi[:1, column], _polar_at_heights(phi[0, column], [MOUTH_Y]))[0, 0]
        weight = float(smoothstep(LIP_HALF_WIDTH + 0.008, LIP_HALF_WIDTH - 0.002, abs(x)))
        if weight == 0.0:
            continue
        upper, lower = lip_border(np.array(x))
        upper_fractions = np.array((OUTSIDE_BORDER,) + UPPER_LIP_ROWS[::-1])
        lower_fractions = np.array(LOWER_LIP_ROWS[1:] + (OUTSIDE_BORDER,))
        above = MOUTH_Y + upper * upper_fractions + BORDER_GAP * (upper_fractions > 1)
        above = np.r_[heights[top, column], np.linspace(heights[top, column], above[0], UPPER_BLEND_ROWS + 1)[1:-1], above]
        below = MOUTH_Y - lower * lower_fractions - BORDER_GAP * (lower_fractions > 1)
        below = np.r_[below, np.linspace(below[-1], heights[bottom, column], LOWER_BLEND_ROWS + 1)[1:]]
        targets = np.r_[above, below]
        assert len(targets) == bottom - top + 1
        aligned = _polar_at_heights(phi[0, column], targets)
        polar[top:bottom + 1, column] = weight * aligned + (1 - weight) * polar[top:bottom + 1, column]
    return polar, seam_row


def head_skin() -> Part:
    """The skin grid, its poles, the duplicated lower lip row and the mouth bag hanging from the lips."""
    phi, polar = np.meshgrid(_column_angles(), _row_angles())
    polar, seam_row = _lip_aligned_rows(phi, polar)
    skin = _surface(phi, polar)
    facing_down = smoothstep(-0.35, -0.75, _grid_normals(skin)[..., 1]).ravel()
    seam = skin[seam_row]
    inside = np.flatnonzero((np.abs(seam[:, 0]) < MOUTH_HALF_WIDTH) & (seam[:, 2] > CENTRE[2]))
    corners = (inside.min() - 1, inside.max() + 1)
    vertices = skin.reshape(-1, 3)
    count = len(vertices)
    top = CENTRE + np.array([0, SEMI_AXES[1], 0])
    bottom_pole = vertices[(ROWS - 1) * COLUMNS:].mean(axis=0) - np.array([0, 0.004, 0])
    lower_copies = seam[inside] - np.array([0.0, 2e-5, 0.0])  # lips meet at rest (apart only to pair mirror twins)
    vertices = np.concatenate([vertices, [top, bottom_pole], lower_copies])
    faces = grid_faces(ROWS, COLUMNS, wrap=True)
    faces = np.concatenate([faces, cap_faces(0, COLUMNS, count, flip=True),
                            cap_faces((ROWS - 1) * COLUMNS, COLUMNS, count + 1, flip=False)])
    copy_of = np.full(count + 2, -1)
    copy_of[seam_row * COLUMNS + inside] = count + 2 + np.arange(len(inside))
    below = (faces >= (seam_row + 1) * COLUMNS) & (faces < (seam_row + 2) * COLUMNS)
    touches_below = below.any(axis=1)
    replace = touches_below[:, None] & (copy_of[np.minimum(faces, count + 1)] >= 0)
    faces = np.where(replace, copy_of[np.minimum(faces, count + 1)], faces)
    faces = outward(vertices, faces)

    loop = np.concatenate([seam_row * COLUMNS + np.arange(corners[0], corners[1] + 1),
                           count + 2 + np.arange(len(inside))[::-1]])
    bag_vertices, bag_faces, bag_alpha, bag_ring = _mouth_bag(vertices[loop], len(vertices))
    bag_faces = np.where(bag_faces < 0, loop[np.clip(-bag_faces - 1, 0, len(loop) - 1)], bag_faces)
    faces = _match_orientation(np.concatenate([faces, bag_faces]), len(faces), vertices, loop)
    vertices = np.concatenate([vertices, bag_vertices])

    rows = np.concatenate([np.repeat(np.arange(ROWS), COLUMNS), [-1, ROWS], np.full(len(inside), seam_row)])
    n_skin = count + 2 + len(inside)
    below_seam = np.zeros(len(vertices))
    below_seam[:n_skin] = rows > seam_row
    below_seam[count + 2:n_skin] = 1.0
    below_seam[n_skin:] = bag_alpha < 0
    tags = {
        "skin": np.r_[np.ones(n_skin), np.zeros(len(bag_vertices))],
        "below_seam": below_seam,
        "seam": np.r_[np.zeros(count + 2), np.ones(len(inside)), np.zeros(len(bag_vertices))],
        "bag_alpha": np.r_[np.zeros(n_skin), bag_alpha],
        "bag_ring": np.r_[np.zeros(n_skin), bag_ring],
        "facing_down": np.r_[facing_down, np.zeros(len(vertices) - count)],
    }
    tags["seam"][seam_row * COLUMNS + np.arange(corners[0], corners[1] + 1)] = 1.0
    colors = _skin_colors(vertices, tags)
    return Part("head", vertices, faces, colors, one_joint(len(vertices), "head"), tags)


def _grid_normals(grid: np.ndarray) -> np.ndarray:
    """Unit normals (pointing out of the head) of a (rows, columns) closed-around grid of points."""
    along_rows = np.roll(grid, -1, axis=1) - np.roll(grid, 1, axis=1)
    along_columns = np.gradient(grid, axis=0)
    normals = np.cross(along_rows, along_columns)
    normals *= np.sign(np.einsum("rci,rci->rc", normals, grid - CENTRE))[..., None]
    return normals / np.maximum(np.linalg.norm(normals, axis=-1, keepdims=True), 1e-12)


def _match_orientation(faces: np.ndarray, skin_count: int, vertices: np.ndarray, loop: np.ndarray) -> np.ndarray:
    """Flip the bag's faces if they disagree with the skin across a shared lip edge."""
    a, b = loop[1], loop[2]
    skin = faces[:skin_count]
    bag = faces[skin_count:]

    def has_directed(group, u, v):
        return bool(((group == u) & (np.roll(group, -1, axis=1) == v)).any())

    if has_directed(bag, a, b) == has_directed(skin, a, b):
        bag = bag[:, ::-1]
    return np.concatenate([skin, bag])


def _mouth_bag(loop_points: np.ndarray, first_index: int):
    """Rings behind the lip loop down into a closed cavity; loop vertices are referenced as -(i+1)."""
    count = len(loop_points)
    x = loop_points[:, 0]
    lower = np.arange(count) > np.argmax(x)
    alpha = np.arccos(np.clip(x / MOUTH_HALF_WIDTH * 0.999, -1, 1))
    alpha[lower] *= -1
    front_z = np.interp(x, np.sort(x[~lower]), loop_points[~lower, 2][np.argsort(x[~lower])])
    rings = [(0.90, 0.0025, 0.004), (0.84, 0.0060, 0.011), (0.82, 0.013, 0.024), (0.62, 0.013, 0.040),
             (0.32, 0.008, 0.050)]
    vertices, ring_index, ring_alpha = [], [], []
    for k, (width, height, depth) in enumerate(rings, start=1):
        vertices.append(np.stack([width * MOUTH_HALF_WIDTH * np.cos(alpha),
                                  MOUTH_Y - 0.001 + height * np.sin(alpha) * np.where(alpha > 0, 1.5, 1.0),
                                  front_z - depth - 0.012 * (k > 1) * (x / MOUTH_HALF_WIDTH) ** 2], -1))
        ring_index.append(np.full(count, k))
        ring_alpha.append(np.sin(alpha))
    end = np.array([[0.0, MOUTH_Y - 0.003, front_z.max() - 0.056]])
    vertices = np.concatenate(vertices + [end])
    ids = np.arange(count)
    faces = []
    previous = -(ids + 1)
    for k in range(len(rings)):
        current = first_index + k * count + ids
        nxt = np.roll(current, -1)
        prev_next = np.roll(previous, -1)
        faces += [np.stack([previous, current, prev_next], -1), np.stack([prev_next, current, nxt], -1)]
        previous = current
    pole = first_index + len(rings) * count
    faces.append(np.stack([previous, np.full(count, pole), np.roll(previous, -1)], -1))
    return (vertices, np.concatenate(faces), np.concatenate(ring_alpha + [[0.0]]),
            np.concatenate(ring_index + [[len(rings) + 1]]))


def lip_mask(points: np.ndarray) -> np.ndarray:
    """1 on the red of the lips, 0 outside; the edge falls between the border row and the row just outside it."""
    x = np.abs(points[:, 0])
    dy = points[:, 1] - MOUTH_Y
    upper, lower = lip_border(x)
    edge = 0.5 * (1 + OUTSIDE_BORDER) - 1.0
    inside_upper = dy <= upper * (1 + edge)
    inside_lower = dy >= -lower * (1 + edge)
    ends = smoothstep(LIP_HALF_WIDTH + 0.0005, LIP_HALF_WIDTH - 0.0025, x)
    return np.where(dy >= 0, inside_upper, inside_lower) * ends


def _skin_colors(vertices: np.ndarray, tags: dict[str, np.ndarray]) -> np.ndarray:
    skin = np.asarray(COLORS["skin"])
    colors = np.tile(skin, (len(vertices), 1))
    front = vertices[:, 2] > 0.03
    blush = 0.35 * _bump2(vertices, 0.045, 1.548, 0.020, 0.016, mirrored=True) * front
    colors += blush[:, None] * (np.array([0.95, 0.60, 0.58]) - skin)
    nostril = np.clip(_bump2(vertices, 0.0058, 1.5420, 0.0034, 0.0024, mirrored=True), 0, 1) * front * tags["facing_down"]
    colors += nostril[:, None] * (np.array([0.45, 0.25, 0.22]) - colors)
    lips = lip_mask(vertices) * front
    colors += lips[:, None] * (np.asarray(COLORS["lips"]) - colors)
    line = tags["seam"] * 0.6
    colors += line[:, None] * (np.asarray(COLORS["lip_line"]) - colors)
    bag = tags["bag_ring"] > 0
    inner_lip = tags["bag_ring"] == 1
    # deeper in the mouth is darker: the cavity falls into shadow behind the lips, as a real mouth does
    depth = np.clip((tags["bag_ring"][bag] - 2) / 2, 0, 1)[:, None]
    colors[bag] = (1 - depth) * np.asarray(COLORS["mouth"]) + depth * np.asarray(COLORS["throat"])
    colors[inner_lip] = 0.5 * (np.asarray(COLORS["lips"]) + np.asarray(COLORS["mouth"]))
    return np.clip(colors, 0, 1)


def seam_front_z() -> float:
    """Depth of the mouth line at the middle of the face."""
    return float(_surface(np.zeros(1), _polar_at_heights(0.0, [MOUTH_Y]))[0, 2])


def teeth_and_tongue() -> list[Part]:
    z_front = seam_front_z()
    parts = []
    # the upper row sits low and deep enough to stay inside the mouth bag when the lips press, roll or close
    # (it used to reach the skin just above the upper lip and poke through it)
    for lower, (centre_y, back, height) in enumerate(((MOUTH_Y + 0.0036, 0.0140, 0.0036),
                                                     (MOUTH_Y - 0.0056, 0.0108, 0.0042))):
        x = np.linspace(-0.017, 0.017, 21)
        z = z_front - back - 34.0 * x ** 2 - 0.004 * (x / 0.017) ** 4
        centres = np.stack([x, np.full_like(x, centre_y), z], -1)
        tangent = np.gradient(centres, axis=0)
        tangent /= np.linalg.norm(tangent, axis=1, keepdims=True)
        up = np.tile([0, 1.0, 0], (len(x), 1))
        across = np.cross(tangent, up)
        half_h = np.full_like(x, height)
        half_t = np.full_like(x, 0.0022)
        vertices, faces = loft(centres, up, across, half_h, half_t, 16, exponent=4.0)
        colors = np.tile(np.asarray(COLORS["teeth"]), (len(vertices), 1))
        gum = (vertices[:, 1] - centre_y) * (1 if not lower else -1) > 0.72 * height
        colors[gum] = (0.86, 0.52, 0.55)
        parts.append(Part("teeth", vertices, outward(vertices, faces), colors, one_joint(len(vertices), "head"),
                          {"jaw": np.full(len(vertices), float(lower))}))
    z = np.linspace(z_front - 0.048, z_front - 0.009, 16)
    t = (z - z[0]) / (z[-1] - z[0])
    half_x = 0.017 * np.sqrt(np.clip(1 - (2 * t - 1) ** 8, 0.02, 1)) * (1 - 0.35 * t ** 2)
    half_y = 0.0065 * np.sqrt(np.clip(1 - (2 * t - 1) ** 4, 0.05, 1))
    centres = np.stack([np.zeros_like(z), MOUTH_Y - 0.0095 + 0.002 * t, z], -1)
    vertices, faces = loft(centres, np.tile([1.0, 0, 0], (16, 1)), np.tile([0, 1.0, 0], (16, 1)), half_x, half_y, 20)
    vertices[:, 1] -= 0.003 * np.clip(vertices[:, 1] - centres[0, 1], 0, None) / 0.0065 * np.exp(
        -(vertices[:, 0] / 0.004) ** 2)
    colors = np.tile(np.asarray(COLORS["tongue"]), (len(vertices), 1))
    parts.append(Part("tongue", vertices, outward(vertices, faces), colors, one_joint(len(vertices), "head"),
                      {"jaw": np.ones(len(vertices)), "tongue_t": np.r_[np.repeat(t, 20), [0.0, 1.0]]}))
    return parts


def throat_wall() -> Part:
    """A dark closed lens at the back of the mouth: an open jaw shows throat, never the neck or shirt behind.

    Its lower half follows the jaw (tag `jaw`), so it keeps covering the opening as the mouth opens.
    """
    z_front = seam_front_z()
    y = np.linspace(MOUTH_Y - 0.024, MOUTH_Y + 0.020, 14)
    t = (y - y[0]) / (y[-1] - y[0])
    round_ends = np.sqrt(np.clip(1 - (2 * t - 1) ** 2, 0.03, 1))
    lean_back = 0.4 * np.clip(MOUTH_Y - y, 0, None)  # the lower end tucks into the neck, out of sight at rest
    centres = np.stack([np.zeros_like(y), y, z_front - 0.053 - lean_back], -1)
    vertices, faces = loft(centres, np.tile([1.0, 0, 0], (14, 1)), np.tile([0, 0, 1.0], (14, 1)),
                           0.024 * round_ends, 0.005 * round_ends, 20)
    colors = np.tile(np.asarray(COLORS["throat"]), (len(vertices), 1))
    jaw = smoothstep(MOUTH_Y + 0.004, MOUTH_Y - 0.010, vertices[:, 1])
    return Part("mouth", vertices, outward(vertices, faces), colors, one_joint(len(vertices), "head"), {"jaw": jaw})


def skin_point(x: float, y: float, skin: Part) -> np.ndarray:
    """The skin point in front at (x, y) (nearest front-facing skin vertices, averaged)."""
    v = skin.vertices
    candidates = np.flatnonzero((v[:, 2] > 0.02) & (skin.tags["skin"] > 0))
    d2 = (v[candidates, 0] - x) ** 2 + (v[candidates, 1] - y) ** 2
    nearest = candidates[np.argsort(d2)[:4]]
    weights = 1.0 / (np.sort(d2)[:4] + 1e-10)
    return np.array([x, y, float((v[nearest, 2] * weights).sum() / weights.sum())])


def eye_centre(skin: Part) -> np.ndarray:
    surface = skin_point(EYE_X, EYE_Y, skin)
    return surface - np.array([0, 0, 0.42 * EYE_RADIUS])


def left_eyeball(centre: np.ndarray) -> Part:
    theta = np.array([0.10, 0.19, 0.245, 0.265, 0.33, 0.41, 0.48, 0.535, 0.565, 0.60, 0.68, 0.82, 1.0, 1.2,
                      1.45, 1.75, 2.1, 2.5, 2.85])
    segments = 36
    azimuth = 2 * np.pi * np.arange(segments) / segments
    bulge = 1.0 + 0.05 * smoothstep(0.62, 0.2, theta)
    rings = np.stack([
        np.sin(theta)[:, None] * np.cos(azimuth)[None] * bulge[:, None],
        np.sin(theta)[:, None] * np.sin(azimuth)[None] * bulge[:, None],
        np.cos(theta)[:, None] * np.ones_like(azimuth)[None] * bulge[:, None],
    ], -1).reshape(-1, 3)
    vertices = centre + EYE_RADIUS * np.concatenate([rings, [[0, 0, 1.05]], [[0, 0, -1.0]]])
    faces = grid_faces(len(theta), segments, wrap=True)
    pole_front, pole_back = len(rings), len(rings) + 1
    faces = np.concatenate([faces, cap_faces(0, segments, pole_front, flip=True),
                            cap_faces((len(theta) - 1) * segments, segments, pole_back, flip=False)])
    polar = np.r_[np.repeat(theta, segments), [0.0, np.pi]]
    colors = np.tile(np.asarray(COLORS["sclera"]), (len(vertices), 1))
    iris = polar < 0.55
    shade = smoothstep(0.27, 0.55, polar)[:, None]
    iris_colour = np.asarray(COLORS["iris"]) * (1.1 - 0.3 * shade) + 0.0 * shade
    colors[iris] = iris_colour[iris]
    colors[(polar > 0.55) & (polar < 0.58)] = COLORS["iris_rim"]
    colors[polar < 0.25] = COLORS["pupil"]
    colors = np.clip(colors, 0, 1)
    return Part("eyes", vertices, outward(vertices, faces), colors, one_joint(len(vertices), "left_eye_smplhf"),
                {"eyeball": np.ones(len(vertices))})


def lid_edges(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rest elevations (radians) of the upper and lower lid edges across azimuth `a`."""
    shape = np.cos(np.clip(a / LID_SPAN, -1, 1) * np.pi / 2)
    tilt = 0.07 * a / LID_SPAN
    return 0.42 * shape ** 0.6 - 0.06 + tilt, -0.36 * shape ** 0.8 - 0.06 + tilt


def lid_point(centre: np.ndarray, radius: np.ndarray, a: np.ndarray, elevation: np.ndarray) -> np.ndarray:
    return centre + radius[:, None] * np.stack([np.cos(elevation) * np.sin(a), np.sin(elevation),
                                                np.cos(elevation) * np.cos(a)], -1)


def left_lids(centre: np.ndarray) -> list[Part]:
    """Spherical-shell lids around the eyeball; a rim row gives the lid edge thickness."""
    columns = 27
    a = np.linspace(-LID_SPAN, LID_SPAN, columns)
    t_rows = np.r_[0.0, 0.0, np.linspace(0.06, 1.0, 10)]
    parts = []
    for upper, radius in ((1.0, UPPER_LID_RADIUS), (-1.0, LOWER_LID_RADIUS)):
        rim = np.r_[1.0, np.zeros(len(t_rows) - 1)]
        t_grid, a_grid = np.meshgrid(t_rows, a, indexing="ij")
        rim_grid = np.repeat(rim[:, None], columns, axis=1)
        r_grid = np.where(rim_grid > 0, 1.03 * EYE_RADIUS, radius)
        edge = lid_edges(a_grid)[0 if upper > 0 else 1]
        elevation = edge + (upper * LID_TOP - edge) * t_grid
        vertices = lid_point(centre, r_grid.ravel(), a_grid.ravel(), elevation.ravel())
        faces = grid_faces(len(t_rows), columns, wrap=False)
        normals_out = (vertices[faces].mean(axis=1) - centre)
        tri = vertices[faces]
        face_normals = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
        if np.einsum("ij,ij->i", face_normals, normals_out).sum() < 0:
            faces = faces[:, ::-1].copy()
        colors = np.tile(np.asarray(COLORS["skin"]) * 0.97, (len(vertices), 1))
        if upper > 0:
            lash = (t_grid.ravel() < 0.07)
            colors[lash] = COLORS["lashes"]
        else:
            colors[t_grid.ravel() == 0.0] = np.asarray(COLORS["skin_shadow"])
        tags = {"lid": np.full(len(vertices), upper), "lid_a": a_grid.ravel(), "lid_t": t_grid.ravel(),
                "lid_r": r_grid.ravel()}
        parts.append(Part("eyelids", vertices, faces, colors, one_joint(len(vertices), "head"), tags))
    return parts


def left_brow(skin: Part) -> Part:
    u = np.linspace(0, 1, 18)
    x = 0.013 + 0.045 * u
    y = EYE_Y + 0.020 + 0.007 * np.sin(np.pi * np.clip(u * 1.1, 0, 1)) - 0.002 * u
    centres = np.array([skin_point(xi, yi, skin) + np.array([0, 0, 0.0012]) for xi, yi in zip(x, y)])
    tangent = np.gradient(centres, axis=0)
    tangent /= np.linalg.norm(tangent, axis=1, keepdims=True)
    out = np.tile([0.0, 0.0, 1.0], (len(u), 1))
    up = np.cross(out, tangent)
    up /= np.linalg.norm(up, axis=1, keepdims=True)
    out = np.cross(tangent, up)
    half_h = 0.0036 * (1 - 0.55 * u) * np.sqrt(np.clip(1 - ((u - 0.4) / 0.62) ** 8, 0.1, 1))
    vertices, faces = loft(centres, up, out, half_h, np.full_like(u, 0.0014), 10)
    colors = np.tile(np.asarray(COLORS["brows"]), (len(vertices), 1))
    return Part("brows", vertices, outward(vertices, faces), colors, one_joint(len(vertices), "head"), {})


def left_ear() -> Part:
    y = np.linspace(1.548, 1.622, 14)
    t = (y - y[0]) / (y[-1] - y[0])
    half_z = 0.020 * np.sqrt(np.clip(1 - (2 * t - 1) ** 2, 0.02, 1)) * (0.85 + 0.25 * t)
    half_x = 0.0075 * np.sqrt(np.clip(1 - (2 * t - 1) ** 2, 0.05, 1))
    centres = np.stack([0.080 + 0.004 * t, y, -0.008 - 0.010 * t], -1)
    vertices, faces = loft(centres, np.tile([1.0, 0, 0], (14, 1)), np.tile([0, 0, 1.0], (14, 1)),
                           half_x, half_z, 20)
    rel = vertices - centres.mean(axis=0)
    bowl = np.clip(1 - (rel[:, 1] / 0.024) ** 2 - (rel[:, 2] / 0.012) ** 2, 0, None) * (vertices[:, 0] > centres[:, 0].mean())
    vertices[:, 0] -= 0.006 * bowl
    colors = np.tile(np.asarray(COLORS["skin"]) * np.array([1.0, 0.95, 0.95]), (len(vertices), 1))
    colors -= 0.12 * bowl[:, None]
    return Part("head", vertices, outward(vertices, faces), np.clip(colors, 0, 1), one_joint(len(vertices), "head"),
                {})


HAIR_COLUMNS, HAIR_ROWS = 112, 30
HAIR_STRANDS = 24  # clumps around the head; the grooves between them catch the light like combed hair
# hairline: polar angle (from the crown) of the hair's edge against azimuth |phi| (0 = front, pi = nape)
HAIRLINE_KNOTS = ((0.0, 0.93), (0.40, 0.90), (0.72, 0.97), (1.00, 1.14), (1.16, 1.42), (1.25, 1.64),
                  (1.35, 1.64), (1.43, 1.28), (1.62, 1.20), (1.84, 1.22), (1.98, 1.62), (2.15, 2.02), (2.40, 2.28),
                  (np.pi, 2.38))


def hairline(phi: np.ndarray) -> np.ndarray:
    """Polar angle of the hair's edge: a soft forehead line, temples, sideburns, clear of the ears, low at the nape."""
    fine = np.linspace(0.0, np.pi, 1201)
    knots = np.array(HAIRLINE_KNOTS)
    raw = np.interp(fine, knots[:, 0], knots[:, 1])
    kernel = np.exp(-0.5 * (np.arange(-60, 61) * (np.pi / 1200) / 0.035) ** 2)
    padded = np.concatenate([raw[60:0:-1], raw, raw[-2:-62:-1]])
    smooth = np.convolve(padded, kernel / kernel.sum(), mode="valid")
    return np.interp(np.abs(phi), fine, smooth)


def hair_cap() -> Part:
    """A short modern cut: a lifted quiff over the forehead, volume on top, close sides with sideburns,
    tapered to the nape. A shell over the cranium whose edge tucks under the skin, grooved into strands.
    """
    columns, rows = HAIR_COLUMNS, HAIR_ROWS
    phi = -np.pi + 2 * np.pi * np.arange(columns) / columns
    edge = hairline(phi)
    t = np.linspace(0, 1, rows + 1)[1:]
    polar = edge[None, :] * t[:, None] ** 0.85
    phi_grid = np.broadcast_to(phi, polar.shape)
    points, normals = base_surface(phi_grid, polar)
    front = np.cos(phi_grid)
    side = np.sin(np.abs(phi_grid))
    inset = edge[None, :] - polar  # radians inside the hairline
    rise = smoothstep(0.0, 0.05 + 0.10 * (1 - np.clip(front, 0, 1)), inset)
    thickness = (0.0045
                 + 0.0075 * smoothstep(1.35, 0.55, polar)
                 + 0.0060 * side ** 2 * smoothstep(1.45, 0.9, polar) * smoothstep(0.3, 0.7, polar)
                 + 0.0070 * np.clip(front, 0, 1) ** 3 * smoothstep(1.05, 0.45, polar) * smoothstep(0.05, 0.4, polar)
                 + 0.0020 * np.clip(-front, 0, 1) * smoothstep(1.9, 1.2, polar)
                 - 0.0025 * smoothstep(1.8, 2.3, polar))
    strand = np.abs(phi_grid) + 0.10 * t[:, None] ** 2
    groove = (0.5 + 0.5 * np.cos(HAIR_STRANDS * strand)) ** 4
    texture = smoothstep(0.08, 0.35, t)[:, None] * smoothstep(0.0, 0.06, inset)
    offset = rise * (thickness - 0.0011 * groove * texture) - 0.0016 * (1 - rise)
    lift = 0.0050 * np.clip(front, 0, 1) ** 4 * smoothstep(0.5, 0.85, polar) * smoothstep(0.0, 0.12, inset)
    vertices = points + normals * offset[..., None] + np.array([0.0, 0.6, 1.0]) * lift[..., None]
    vertices = vertices.reshape(-1, 3)
    top = CENTRE + np.array([0, SEMI_AXES[1] + 0.0125, 0])
    vertices = np.concatenate([vertices, [top]])
    faces = np.concatenate([grid_faces(rows, columns, wrap=True), cap_faces(0, columns, len(vertices) - 1, flip=True)])
    tri = vertices[faces]
    face_normals = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    if np.einsum("ij,ij->i", face_normals, tri.mean(axis=1) - CENTRE).sum() < 0:
        faces = faces[:, ::-1].copy()
    clump = np.floor(HAIR_STRANDS * strand / (2 * np.pi) + 0.5)
    tint = 1.0 + 0.06 * np.sin(12.9898 * clump) - 0.22 * groove * texture
    tint *= 1.0 + 0.10 * smoothstep(1.2, 0.4, polar) * np.clip(front + 0.5, 0, 1) - 0.12 * (1 - smoothstep(0.0, 0.08, inset))
    shade = np.r_[tint.ravel(), [1.05]]
    colors = np.asarray(COLORS["hair"])[None] * shade[:, None]
    return Part("hair", vertices, faces, np.clip(colors, 0, 1), one_joint(len(vertices), "head"), {})
