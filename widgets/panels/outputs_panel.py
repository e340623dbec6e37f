"""The Outputs panel: VMC and Live Link Face out and in, on and off with address, port and rate; packets per
second, the tracker's state, errors in plain words; and where each region's motion comes from.

The links themselves are studio.interop.links.LiveLinks (Qt-free); this panel edits their settings and reads
their status twice a second. The control API row switches studio.api.switch.ApiSwitch (loopback only), asks the
operator about each client name not approved yet (Allow / Deny, while the client waits) and lists the approved
names, each revocable.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFormLayout,
    QFrame,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from studio.api.switch import DEFAULT_PORT, ApiSwitch
from studio.interop.links import LINK_TITLES, OUTPUTS, LinkSettings, LiveLinks, links_path
from studio.interop.tracking import REGION_LABELS, REGIONS
from studio.interop.unity import BLEND_NAMINGS
from widgets.panels.common import MessageLine, scrolling, section

REFRESH_MS = 500
NAMING_TITLES = {"arkit": "ARKit (camelCase)", "perfect_sync": "Perfect sync (PascalCase)", "vrm": "VRM presets"}
SOURCE_TITLES = {"tracker": "Tracker", "voice": "Voice / engine"}


class LinkRow:
    """One link's controls in the grid: on/off, address, port, rate (outputs), naming (VMC out), status."""

    def __init__(self, panel: OutputsPanel, grid: QGridLayout, row: int, name: str) -> None:
        self.panel, self.name = panel, name
        settings = panel.links.settings[name]
        self.enabled = QCheckBox(LINK_TITLES[name])
        self.enabled.setObjectName(f"{name}Enabled")
        self.host = QLineEdit(settings.host)
        self.host.setToolTip("Address to send to" if name in OUTPUTS else "Address to listen on (0.0.0.0: every network)")
        self.port = QSpinBox()
        self.port.setRange(1, 65535)
        self.port.setValue(settings.port)
        self.rate = QSpinBox()
        self.rate.setRange(1, 240)
        self.rate.setSuffix(" Hz")
        self.rate.setValue(round(settings.rate_hz))
        if name in OUTPUTS:
            self.rate.setToolTip("Frames per second sent: the preset's frame rate, set again when the preset changes")
        self.rate.setEnabled(name in OUTPUTS)
        self.rate.setVisible(name in OUTPUTS)
        self.status = QLabel("off")
        self.status.setObjectName(f"{name}Status")
        self.status.setWordWrap(True)
        grid.addWidget(self.enabled, row, 0)
        grid.addWidget(self.host, row, 1)
        grid.addWidget(self.port, row, 2)
        grid.addWidget(self.rate, row, 3)
        grid.addWidget(self.status, row + 1, 0, 1, 4)
        self.naming: QComboBox | None = None
        if name == "vmc_out":
            self.naming = QComboBox()
            for naming in BLEND_NAMINGS:
                self.naming.addItem(NAMING_TITLES[naming], naming)
            self.naming.setToolTip("How the 52 weights are named for the receiver")
            grid.addWidget(self.naming, row + 2, 1, 1, 3)
            self.naming.currentIndexChanged.connect(self._changed_while_on)
        self.enabled.toggled.connect(self.apply)
        self.host.editingFinished.connect(self._changed_while_on)
        self.port.editingFinished.connect(self._changed_while_on)
        self.rate.editingFinished.connect(self._changed_while_on)

    def settings(self) -> LinkSettings:
        current = self.panel.links.settings[self.name]
        return replace(current, enabled=self.enabled.isChecked(), host=self.host.text().strip(), port=self.port.value(),
                       rate_hz=float(self.rate.value()),
                       naming=self.naming.currentData() if self.naming is not None else current.naming)

    def apply(self) -> None:
        error = self.panel.links.apply(self.name, self.settings())
        self.panel.save()
        if error is not None:
            self.enabled.blockSignals(True)
            self.enabled.setChecked(False)
            self.enabled.blockSignals(False)
        self.refresh()

    def _changed_while_on(self) -> None:
        if self.enabled.isChecked():
            self.apply()

    def refresh(self) -> None:
        status = self.panel.links.status(self.name)
        self.status.setText(status.detail)
        self.status.setStyleSheet("color: #ff8a80;" if status.error else "color: #8b8f98;")


class ApiRow:
    """The control API: on/off, port (127.0.0.1 only), its address and clients when running, and the token."""

    def __init__(self, panel: OutputsPanel, layout: QVBoxLayout, api: ApiSwitch) -> None:
        self.panel, self.api = panel, api
        self.enabled = QCheckBox("API")
        self.enabled.setObjectName("apiEnabled")
        self.enabled.setToolTip("The control API (WebSocket and HTTP) on this machine only (127.0.0.1)")
        self.port = QSpinBox()
        self.port.setRange(1, 65535)
        self.port.setValue(DEFAULT_PORT)
        self.port.setToolTip("TCP port on 127.0.0.1")
        self.status = QLabel("off")
        self.status.setObjectName("apiStatus")
        self.status.setWordWrap(True)
        self.status.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.token = QLineEdit()
        self.token.setObjectName("apiToken")
        self.token.setReadOnly(True)
        self.token.setToolTip("Clients send this token first; it is kept readable by you only")
        self.requests = QVBoxLayout()  # one row per client name waiting for the operator's answer
        self.requests.setContentsMargins(0, 0, 0, 0)
        self.prompts: dict[str, tuple[QFrame, QPushButton, QPushButton]] = {}
        self.approved = QComboBox()
        self.approved.setObjectName("apiApproved")
        self.approved.setToolTip("Client names you allowed; they connect without asking until revoked")
        self.approved.setPlaceholderText("no client approved yet")
        self.revoke = QPushButton("Revoke")
        self.revoke.setToolTip("Forget this approval and disconnect the client; it is asked about again next time")
        self.copy = QPushButton("Copy")
        self.copy.setToolTip("Copy the token to the clipboard")
        self.renew = QPushButton("New token")
        self.renew.setToolTip("Make a new token; clients connecting from now on need it")
        top = QHBoxLayout()
        top.addWidget(self.enabled)
        top.addWidget(QLabel("Port"))
        top.addWidget(self.port)
        top.addStretch(1)
        tokens = QHBoxLayout()
        tokens.addWidget(QLabel("Token"))
        tokens.addWidget(self.token, 1)
        tokens.addWidget(self.copy)
        tokens.addWidget(self.renew)
        approved = QHBoxLayout()
        approved.addWidget(QLabel("Approved"))
        approved.addWidget(self.approved, 1)
        approved.addWidget(self.revoke)
        layout.addLayout(top)
        layout.addWidget(self.status)
        layout.addLayout(self.requests)
        layout.addLayout(tokens)
        layout.addLayout(approved)
        self.revoke.clicked.connect(self._revoke)
        self.enabled.toggled.connect(self.apply)
        self.port.editingFinished.connect(self._port_changed)
        self.copy.clicked.connect(lambda: QGuiApplication.clipboard().setText(self.token.text()))
        self.renew.clicked.connect(lambda: self._show_token(self.api.new_token))
        self._show_token(self.api.token)
        self._show_approved()

    def settings(self) -> dict:
        """What the window keeps for its next session: whether the API is on, and its port."""
        return {"on": self.api.running, "port": self.port.value()}

    def restore(self, saved: object, where: str) -> None:
        """Take a session's `settings()`: the port at once; the API is switched on once the window's loop runs
        (so the window shows before the engine starts). A bad value is said under the panel and left unused."""
        port = saved.get("port") if isinstance(saved, dict) else None
        on = saved.get("on") if isinstance(saved, dict) else None
        if not isinstance(on, bool) or isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            self.panel.message.error(f"{where} is {saved!r}; expected {{\"on\": true or false, \"port\": 1..65535}}, "
                                     "so the API stays off")
            return
        self.port.setValue(port)
        if on:
            QTimer.singleShot(0, self.enabled, lambda: self.enabled.setChecked(True))

    def _show_token(self, get_token) -> None:
        try:
            self.token.setText(get_token())
        except (OSError, ValueError) as error:
            self.token.clear()
            self.panel.message.error(f"API token: {error}")

    def apply(self) -> None:
        if not self.enabled.isChecked():
            self.api.stop()
        elif self.api.start(self.port.value()) is not None:
            self.enabled.blockSignals(True)
            self.enabled.setChecked(False)
            self.enabled.blockSignals(False)
        self.refresh()

    def _port_changed(self) -> None:
        if self.api.running and self.api.thread.port != self.port.value():
            self.api.stop()
            self.apply()

    def refresh(self) -> None:
        if self.api.running:
            count = self.api.client_count()
            self.status.setText(f"{self.api.address} — {count} client{'' if count == 1 else 's'} connected")
        else:
            self.status.setText(self.api.error or "off")
        self.status.setStyleSheet("color: #ff8a80;" if self.api.error and not self.api.running else "color: #8b8f98;")
        self._show_requests()
        self._show_approved()

    def _show_requests(self) -> None:
        """A row for each client waiting to be allowed; a row whose client stopped waiting goes."""
        waiting = self.api.approvals.waiting()
        for name in [name for name in self.prompts if name not in waiting]:
            self._remove_prompt(name)
        for name in waiting:
            if name not in self.prompts:
                self._add_prompt(name)
                self.panel.approval_asked.emit(name)

    def _add_prompt(self, name: str) -> None:
        frame = QFrame()
        frame.setObjectName("apiRequest")
        frame.setStyleSheet("QFrame#apiRequest { border: 1px solid #e5c07b; border-radius: 3px; background: #2e2a1f; }")
        text = QLabel(f"Client '{name}' wants to control the avatar")
        text.setWordWrap(True)
        text.setStyleSheet("color: #e5c07b; border: none;")
        allow, deny = QPushButton("Allow"), QPushButton("Deny")
        allow.setToolTip(f"Let '{name}' control the avatar now and whenever it connects again (revocable below)")
        deny.setToolTip(f"Refuse '{name}' this time; it is asked about again if it reconnects")
        row = QHBoxLayout(frame)
        row.setContentsMargins(6, 4, 6, 4)
        row.addWidget(text, 1)
        row.addWidget(allow)
        row.addWidget(deny)
        allow.clicked.connect(lambda: self.answer(name, True))
        deny.clicked.connect(lambda: self.answer(name, False))
        self.requests.addWidget(frame)
        self.prompts[name] = (frame, allow, deny)

    def answer(self, name: str, allowed: bool) -> None:
        self.api.approvals.answer(name, allowed)
        self._remove_prompt(name)

    def _remove_prompt(self, name: str) -> None:
        prompt = self.prompts.pop(name, None)
        if prompt is not None:
            prompt[0].hide()  # gone from the panel now; deleted when the event loop next gets to it
            prompt[0].deleteLater()

    def _show_approved(self) -> None:
        names = self.api.approved_names()
        shown = [self.approved.itemText(i) for i in range(self.approved.count())]
        if names != shown:
            current = self.approved.currentText()
            self.approved.clear()
            self.approved.addItems(names)  # with a placeholder set, Qt selects none of them by itself
            self.approved.setCurrentIndex(names.index(current) if current in names else 0 if names else -1)
        self.approved.setEnabled(bool(names))
        self.revoke.setEnabled(bool(names))

    def _revoke(self) -> None:
        name = self.approved.currentText()
        if name:
            self.api.revoke(name)
            self._show_approved()


class OutputsPanel(QWidget):
    """Live links to other programs; `links` is the Qt-free model behind it."""

    approval_asked = Signal(str)  # a client name waits for the operator's Allow or Deny here

    def __init__(self, links: LiveLinks, settings_path: Path | None = None, api: ApiSwitch | None = None) -> None:
        """`settings_path`: where addresses, ports, rates and region sources are kept (the user's config by default);
        `api`: the window's control API switch (no API row without it)."""
        super().__init__()
        self.links = links
        self.settings_path = settings_path or links_path()
        self.message = MessageLine()
        problem = links.load(self.settings_path)
        if problem:
            self.message.error(problem)
        layout = QVBoxLayout()
        layout.addWidget(section("Live links"))
        grid = QGridLayout()
        grid.setColumnStretch(1, 1)
        for column, title in enumerate(("", "Address", "Port", "Rate")):
            grid.addWidget(QLabel(title), 0, column)
        self.rows: dict[str, LinkRow] = {}
        row = 1
        for name in ("vmc_out", "livelink_out", "vmc_in", "livelink_in"):
            self.rows[name] = LinkRow(self, grid, row, name)
            row += 3 if name == "vmc_out" else 2
        layout.addLayout(grid)
        self.api_row: ApiRow | None = None
        if api is not None:
            layout.addWidget(section("Control API"))
            self.api_row = ApiRow(self, layout, api)

        layout.addWidget(section("Tracker"))
        self.tracker_state = QLabel("off")
        self.tracker_state.setObjectName("trackerState")
        layout.addWidget(self.tracker_state)
        form = QFormLayout()
        self.sources: dict[str, QComboBox] = {}
        for region in REGIONS:
            combo = QComboBox()
            combo.setObjectName(f"{region}Source")
            for source, title in SOURCE_TITLES.items():
                combo.addItem(title, source)
            combo.setCurrentIndex(combo.findData(links.mixer.sources[region]))
            combo.currentIndexChanged.connect(lambda _index, r=region, c=combo: self.set_source(r, c.currentData()))
            form.addRow(REGION_LABELS[region].capitalize(), combo)
            self.sources[region] = combo
        layout.addLayout(form)
        layout.addWidget(self.message)
        layout.addStretch(1)
        scrolling(self, layout)
        self.timer = QTimer(self, interval=REFRESH_MS)
        self.timer.timeout.connect(self.refresh)
        self.timer.start()

    def set_source(self, region: str, source: str) -> None:
        self.links.set_source(region, source)
        self.save()

    def follow_preset(self, preset) -> None:
        """A new preset: VMC out and Live Link out send at its frame rate from now on."""
        errors = self.links.follow_rate(preset.render.fps)
        for name in OUTPUTS:
            row = self.rows[name]
            row.rate.setValue(round(self.links.settings[name].rate_hz))
            if name in errors:
                row.enabled.blockSignals(True)
                row.enabled.setChecked(False)
                row.enabled.blockSignals(False)
            row.refresh()
        self.save()

    def save(self) -> None:
        """Keep the settings for the next session; a failure is said under the panel, the links go on."""
        try:
            self.links.save(self.settings_path)
        except OSError as error:
            self.message.error(f"could not keep the link settings in {self.settings_path}: {error}")

    def refresh(self) -> None:
        self.links.follow_engine()
        for row in self.rows.values():
            row.refresh()
        if self.api_row is not None:
            self.api_row.refresh()
        state = self.links.tracker_status()
        self.tracker_state.setText(f"Tracker: {state}")
        self.tracker_state.setStyleSheet("color: #ff8a80;" if state.startswith("no packets") else "")
