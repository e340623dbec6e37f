"""Colours (display RGB 0..1) of the default avatar's parts."""

COLORS: dict[str, tuple[float, float, float]] = {
    "skin": (0.93, 0.74, 0.62),
    "skin_shadow": (0.86, 0.62, 0.52),
    "lips": (0.80, 0.45, 0.45),
    "lip_line": (0.55, 0.27, 0.28),
    "sclera": (0.97, 0.96, 0.94),
    "iris": (0.28, 0.50, 0.72),
    "iris_rim": (0.12, 0.22, 0.36),
    "pupil": (0.04, 0.04, 0.05),
    "lashes": (0.12, 0.08, 0.07),
    "hair": (0.33, 0.20, 0.12),
    "brows": (0.26, 0.16, 0.10),
    "mouth": (0.36, 0.12, 0.14),
    "throat": (0.16, 0.05, 0.06),
    "teeth": (0.97, 0.96, 0.92),
    "tongue": (0.84, 0.42, 0.44),
    "shirt": (0.16, 0.55, 0.62),
    "belt": (0.20, 0.15, 0.12),
    "trousers": (0.20, 0.24, 0.36),
    "shoes": (0.93, 0.93, 0.91),
    "sole": (0.30, 0.30, 0.32),
}
