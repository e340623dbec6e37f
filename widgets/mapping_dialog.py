"""Avatar → Edit Mapping…: which morph target, expression or node drives each engine channel of an imported avatar.

A table of the 52 ARKit shapes and the humanoid bones the engine turns (studio.avatar.mapping_model holds the
rows; this dialog only shows and edits them): each row's source, weight and how it was matched, missing rows
highlighted, a filter. The Source cell edits as a combo box of the avatar's morph targets and expressions (or
nodes, for a bone), plus `none`. Selecting a row and dragging the test slider drives that one channel on a small
preview of its own (a second canvas with the edited, unsaved mapping), so the live viewport and the engine's
output are never touched. Save writes `NAME.mapping.yaml` beside the avatar and reloads the avatar in the window;
Cancel discards the edits.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QModelIndex, Qt, QTimer
from PySide6.QtGui import QBrush, QColor
from PySide6.QtWidgets import (
    QAbstractItemView,
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QGroupBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QSlider,
    QSplitter,
    QStyledItemDelegate,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)
from vispy import scene

from render.lod import build_drawn
from render.scene import AvatarView
from studio.avatar.imported import is_gltf_path
from studio.avatar.mapping_file import MappingEntryError
from studio.avatar.mapping_model import MappingModel
from studio.avatar.model import AvatarFormatError
from widgets.panels.common import MessageLine, blocked

COLUMNS = ("Channel", "Drives", "Source", "Weight", "Matched")
CHANNEL, KIND, SOURCE, WEIGHT, MATCHED = range(len(COLUMNS))
MISSING_BACKGROUND = QColor("#3d3024")  # amber: the engine drives this channel, the avatar shows nothing
PROBLEM_FOREGROUND = QColor("#ff8a80")
EDITED_FOREGROUND = QColor("#8fb3ff")
PREVIEW_SIZE = (300, 340)
PREVIEW_REBUILD_MS = 120  # edits in a burst rebuild the preview avatar once


class _SourceDelegate(QStyledItemDelegate):
    """The Source cell's editor: an editable combo box of the row's choices; picking one commits it."""

    def __init__(self, dialog: MappingDialog) -> None:
        super().__init__(dialog.table)
        self.dialog = dialog

    def createEditor(self, parent: QWidget, _option, index: QModelIndex) -> QWidget:  # noqa: N802 - Qt override
        combo = QComboBox(parent)
        combo.setEditable(True)
        combo.setInsertPolicy(QComboBox.InsertPolicy.NoInsert)
        combo.addItems(self.dialog.mapping.choices(index.row()))
        combo.setMaxVisibleItems(20)
        combo.activated.connect(lambda _i, c=combo: self._commit(c))  # an item picked from the list
        combo.lineEdit().returnPressed.connect(lambda c=combo: self._commit(c))  # a name typed in
        return combo

    def _commit(self, combo: QComboBox) -> None:
        if combo.property("committed"):
            return
        combo.setProperty("committed", True)
        self.commitData.emit(combo)
        self.closeEditor.emit(combo)

    def setEditorData(self, editor: QComboBox, index: QModelIndex) -> None:  # noqa: N802 - Qt override
        with blocked(editor):
            editor.setCurrentText(self.dialog.mapping.rows[index.row()].choice)

    def setModelData(self, editor: QComboBox, _model, index: QModelIndex) -> None:  # noqa: N802 - Qt override
        self.dialog.mapping.set_source(index.row(), editor.currentText())


class _WeightDelegate(QStyledItemDelegate):
    """The Weight cell's editor, for a channel driven by one morph or expression: -2..2, as the file allows."""

    def __init__(self, dialog: MappingDialog) -> None:
        super().__init__(dialog.table)
        self.dialog = dialog

    def createEditor(self, parent: QWidget, _option, _index: QModelIndex) -> QWidget:  # noqa: N802 - Qt override
        spin = QDoubleSpinBox(parent)
        spin.setRange(-2.0, 2.0)
        spin.setSingleStep(0.05)
        spin.setDecimals(3)
        return spin

    def setEditorData(self, editor: QDoubleSpinBox, index: QModelIndex) -> None:  # noqa: N802 - Qt override
        with blocked(editor):
            editor.setValue(self.dialog.mapping.rows[index.row()].weight or 1.0)

    def setModelData(self, editor: QDoubleSpinBox, _model, index: QModelIndex) -> None:  # noqa: N802 - Qt override
        if self.dialog.mapping.rows[index.row()].weight is not None:
            self.dialog.mapping.set_weight(index.row(), editor.value())


class MappingDialog(QDialog):
    """The mapping of the avatar file at `avatar_path`. `reload(path)` is called after a save (the window opens
    the avatar again, now with its new mapping); it returns False when the avatar could not be opened."""

    def __init__(self, avatar_path: str | Path, reload: Callable[[str], bool] | None = None,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.mapping = MappingModel(avatar_path)
        self.reload = reload
        self.setWindowTitle(f"Avatar Mapping — {self.mapping.avatar_path.name}")
        self.resize(1000, 640)

        self.summary = QLabel(self.mapping.summary())
        self.summary.setWordWrap(True)
        self.file_problem = MessageLine()
        if self.mapping.file_problem:
            self.file_problem.error(f"{self.mapping.file_problem}\nSaving keeps that file as "
                                    f"{self.mapping.mapping_path.name}.bad.")
        self.filter = QLineEdit()
        self.filter.setPlaceholderText("Filter: channel, source or how it was matched (e.g. mouth, fallback)…")
        self.filter.setClearButtonEnabled(True)
        self.missing_only = QCheckBox("Missing only")
        self.table = self._build_table()
        self.message = MessageLine()

        self.preview_title = QLabel("Select a row to try it")
        self.preview_title.setObjectName("sectionHeader")
        self.preview_canvas = scene.SceneCanvas(app="pyside6", keys=None, show=False, size=PREVIEW_SIZE,
                                                bgcolor=(0.2, 0.21, 0.24, 1.0), parent=self)
        self.preview_canvas.native.setMinimumSize(*PREVIEW_SIZE)
        self.preview = AvatarView(self.preview_canvas, background="studio", camera="head")
        self.test_slider = QSlider(Qt.Orientation.Horizontal)
        self.test_slider.setRange(0, 100)
        self.test_slider.setEnabled(False)
        self.test_value = QLabel("0.00")
        self.test_slider.setToolTip("Drive the selected channel from 0 to 1 on this preview (the live avatar is not "
                                    "affected)")
        self._preview_timer = QTimer(self)
        self._preview_timer.setSingleShot(True)
        self._preview_timer.setInterval(PREVIEW_REBUILD_MS)
        self._preview_timer.timeout.connect(self._rebuild_preview)
        self.preview_builds = 0

        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        self.save_button = self.buttons.button(QDialogButtonBox.StandardButton.Save)
        self.save_button.setToolTip(f"Write {self.mapping.mapping_path.name} beside the avatar and reload the avatar")
        self.buttons.accepted.connect(self.save)
        self.buttons.rejected.connect(self.reject)
        self._lay_out()

        self.filter.textChanged.connect(self._apply_filter)
        self.missing_only.toggled.connect(self._apply_filter)
        self.table.itemSelectionChanged.connect(self._on_selection)
        self.test_slider.valueChanged.connect(self._show_test)
        self.mapping.row_changed.connect(self._on_row_changed)
        self.mapping.dirty_changed.connect(self._show_dirty)
        self._rebuild_preview()
        self._show_dirty(False)

    # ---- construction

    def _build_table(self) -> QTableWidget:
        table = QTableWidget(len(self.mapping.rows), len(COLUMNS))
        table.setHorizontalHeaderLabels(COLUMNS)
        table.verticalHeader().setVisible(False)
        table.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        table.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        table.setEditTriggers(QAbstractItemView.EditTrigger.DoubleClicked | QAbstractItemView.EditTrigger.EditKeyPressed
                              | QAbstractItemView.EditTrigger.SelectedClicked)
        table.setAlternatingRowColors(True)
        table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 8)
        header = table.horizontalHeader()
        for column, mode in ((CHANNEL, QHeaderView.ResizeMode.ResizeToContents),
                             (KIND, QHeaderView.ResizeMode.ResizeToContents),
                             (SOURCE, QHeaderView.ResizeMode.Stretch),
                             (WEIGHT, QHeaderView.ResizeMode.ResizeToContents),
                             (MATCHED, QHeaderView.ResizeMode.ResizeToContents)):
            header.setSectionResizeMode(column, mode)
        self.table = table
        table.setItemDelegateForColumn(SOURCE, _SourceDelegate(self))
        table.setItemDelegateForColumn(WEIGHT, _WeightDelegate(self))
        for index in range(len(self.mapping.rows)):
            for column in range(len(COLUMNS)):
                table.setItem(index, column, QTableWidgetItem())
            self._show_row(index)
        return table

    def _lay_out(self) -> None:
        filters = QHBoxLayout()
        filters.addWidget(self.filter, 1)
        filters.addWidget(self.missing_only)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addLayout(filters)
        left_layout.addWidget(self.table, 1)
        hint = QLabel("Double-click a Source or Weight cell to change it. Amber rows drive nothing on this avatar.")
        hint.setObjectName("hint")
        hint.setWordWrap(True)
        left_layout.addWidget(hint)

        preview_box = QGroupBox("Preview")
        preview_layout = QVBoxLayout(preview_box)
        preview_layout.addWidget(self.preview_title)
        preview_layout.addWidget(self.preview_canvas.native, 1)
        slider_row = QHBoxLayout()
        slider_row.addWidget(QLabel("Test"))
        slider_row.addWidget(self.test_slider, 1)
        slider_row.addWidget(self.test_value)
        preview_layout.addLayout(slider_row)
        note = QLabel("The preview shows your unsaved edits; the live avatar keeps running.")
        note.setObjectName("hint")
        note.setWordWrap(True)
        preview_layout.addWidget(note)

        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(left)
        splitter.addWidget(preview_box)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(self.file_problem)
        layout.addWidget(splitter, 1)
        layout.addWidget(self.message)
        layout.addWidget(self.buttons)

    # ---- model -> widgets

    def _show_row(self, index: int) -> None:
        row = self.mapping.rows[index]
        problem = next((p for p in self.mapping.problems() if p.startswith(f"Row {row.channel}:")), "") \
            if row.match == "edited" else ""
        texts = (row.channel, "face" if row.kind == "arkit" else "bone", row.source_text,
                 "" if row.weight is None else f"{row.weight:g}", row.match)
        with blocked(self.table):
            for column, text in enumerate(texts):
                item = self.table.item(index, column)
                item.setText(text)
                editable = column == SOURCE or (column == WEIGHT and row.weight is not None)
                flags = Qt.ItemFlag.ItemIsEnabled | Qt.ItemFlag.ItemIsSelectable
                item.setFlags(flags | Qt.ItemFlag.ItemIsEditable if editable else flags)
                item.setBackground(QBrush(MISSING_BACKGROUND) if row.missing else QBrush())
                item.setForeground(QBrush(PROBLEM_FOREGROUND) if problem
                                   else QBrush(EDITED_FOREGROUND) if row.match == "edited" else QBrush())
                item.setToolTip(problem or (f"{row.channel} drives nothing on this avatar" if row.missing
                                            else f"{row.channel} ← {row.source_text} ({row.match})"))

    def _on_row_changed(self, index: int) -> None:
        self._show_row(index)
        self._apply_filter()
        problems = self.mapping.problems()
        if problems:
            self.message.error("; ".join(problems))
        else:
            self.message.clear_message()
        self.summary.setText(self.mapping.summary())
        self._preview_timer.start()

    def _show_dirty(self, dirty: bool) -> None:
        self.setWindowTitle(f"Avatar Mapping — {self.mapping.avatar_path.name}" + ("  ● unsaved changes" if dirty else ""))

    def _apply_filter(self) -> None:
        shown = set(self.mapping.filtered(self.filter.text(), self.missing_only.isChecked()))
        for index in range(self.table.rowCount()):
            self.table.setRowHidden(index, index not in shown)

    # ---- preview

    def selected_row(self) -> int | None:
        rows = self.table.selectionModel().selectedRows()
        return rows[0].row() if rows else None

    def select_channel(self, channel: str) -> int:
        """Select the row of an ARKit shape or bone (as a click would) and return its index."""
        index = self.mapping.rows.index(self.mapping.row(channel))
        self.table.selectRow(index)
        self.table.scrollToItem(self.table.item(index, CHANNEL), QAbstractItemView.ScrollHint.PositionAtCenter)
        return index

    def _on_selection(self) -> None:
        index = self.selected_row()
        self.test_slider.setEnabled(index is not None)
        if index is None:
            self.preview_title.setText("Select a row to try it")
            return
        row = self.mapping.rows[index]
        self.preview_title.setText(f"Test {row.channel} ← {row.source_text}")
        if self.mapping.previews_face(index):
            self.preview.frame_head()
        else:
            self.preview.frame_body()
        self._show_test()

    def _show_test(self) -> None:
        amount = self.test_slider.value() / 100.0
        self.test_value.setText(f"{amount:.2f}")
        index = self.selected_row()
        if index is not None:
            self.preview.set_frame(self.mapping.preview_frame(index, amount))
            self.preview_canvas.update()

    def _rebuild_preview(self) -> None:
        """The preview avatar anew from the current rows (after edits), keeping its camera."""
        camera = self.preview.camera.get_state()
        framing = self.preview.framing
        first = self.preview_builds == 0
        model, mesh = build_drawn(self.mapping.preview_avatar())
        self.preview.set_avatar(model, mesh=mesh)
        if first:
            self.preview.frame_head()
        else:
            self.preview.camera.set_state(camera)
            self.preview.framing = framing
        self.preview_builds += 1
        index = self.selected_row()
        if index is not None:
            self.preview_title.setText(f"Test {self.mapping.rows[index].channel} ← {self.mapping.rows[index].source_text}")
        self._show_test()
        self.preview_canvas.update()

    def preview_image(self):
        """The preview as drawn now, RGB (H, W, 3) uint8 (for tests and screenshots)."""
        if self._preview_timer.isActive():
            self._preview_timer.stop()
            self._rebuild_preview()
        return self.preview_canvas.render(alpha=False)

    # ---- save, cancel

    def save(self) -> bool:
        """Write the mapping file, reload the avatar and close; a bad row or a failed write keeps the dialog open
        with the reason (the file on disk is then as it was). With nothing edited it only closes: the user's file,
        comments and all, is not rewritten."""
        if not self.mapping.dirty and not self.mapping.file_problem:
            self.accept()
            return True
        try:
            path = self.mapping.save()
        except MappingEntryError as error:
            self.message.error(f"Not saved: {error.problem}")
            return False
        except OSError as error:
            self.message.error(f"Not saved: cannot write {self.mapping.mapping_path}: {error.strerror or error}")
            return False
        if self.reload is not None and not self.reload(str(self.mapping.avatar_path)):
            self.message.error(f"Saved {path.name}, but the avatar could not be reloaded with it (see the window's message)")
            return False
        self.accept()
        return True

    def done(self, result: int) -> None:
        """Closed by Save, Cancel or Escape: the preview's canvas goes with it."""
        self._preview_timer.stop()
        self.preview_canvas.close()
        super().done(result)


def open_mapping_dialog(window) -> MappingDialog | None:
    """Avatar → Edit Mapping… for the window's avatar (a `.glb`/`.gltf`/`.vrm` file): the dialog, shown window-modal;
    None with a message when the avatar is not an imported file or cannot be read."""
    source = window.viewport.base_avatar.source
    if not is_gltf_path(source):
        window.report_error("Edit Mapping", f"The mapping is for imported avatars (.glb, .gltf, .vrm); "
                            f"{Path(source).name or 'this avatar'} is not one. Open one with File → Open Avatar…")
        return None
    try:
        dialog = MappingDialog(source, reload=window.open_avatar, parent=window)
    except (AvatarFormatError, OSError) as error:
        window.report_error("Edit Mapping", f"Cannot read the avatar's mapping: {error}")
        return None
    dialog.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
    dialog.open()
    return dialog
