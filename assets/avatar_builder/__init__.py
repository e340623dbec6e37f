"""Modules of the procedural default-avatar generator (assets/build_default_avatar.py)."""
