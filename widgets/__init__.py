"""Qt layer: the main window, the viewport and the docks. May import render/ and studio/."""
