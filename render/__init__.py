"""The OpenGL viewport: the avatar visual and shaders, camera and backgrounds, offscreen rendering, MP4 export.

Submodules import vispy (and PyAV inside the export functions); this package file stays import-free so
`import render` is cheap.
"""
