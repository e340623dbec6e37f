"""Entry script of the PyInstaller bundle: the same `avatar-studio` command."""

import sys

from widgets.app import main

if __name__ == "__main__":
    sys.exit(main())
