"""Operator and designer panels: persona, preset, expression editor, operator controls, clean output window."""
