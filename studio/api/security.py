"""Who may use the API and what they may touch: the token, the client names, the folders, and the limits.

- The token is made on first start and kept in the user config folder (AVATAR_STUDIO_HOME/config, else the
  platform's) readable by its owner only; `avatar-studio serve --show-token` prints it, `--new-token` replaces it.
- Client names, as VTube Studio's plugin API has them: the operator approves a name once and it is kept in
  `api-clients.json`; a denied name is always refused. With `require_approval` an unknown name is asked about
  (the `approver` hook: the window asks its operator) or refused; without it, the token is the approval.
- Paths a client names are resolved (symlinks and `..` included) and must lie inside an allowed folder.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import os
import secrets
import stat
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from studio.fileio import atomic_write
from studio.paths import recordings_dir, user_config_dir, user_data_dir

TOKEN_FILE = "api-token"
CLIENTS_FILE = "api-clients.json"
OWNER_ONLY = 0o600


@dataclass(frozen=True)
class Limits:
    """How much one client may ask of the server; every figure is a bound, so a client cannot grow memory or CPU."""

    max_message_bytes: int = 64 * 1024  # larger messages get a `too_large` error reply
    hard_message_bytes: int = 1024 * 1024  # larger ones are not even read: the connection closes (1009)
    max_clients: int = 16
    rate_per_s: float = 50.0  # requests per second, refilled continuously (token bucket)
    burst: int = 100
    flood_close_after: int = 500  # rate-limited requests in a row before the connection is closed
    send_queue: int = 256  # messages waiting for one client; the oldest are dropped when it is full
    slow_client_drops: int = 512  # dropped in a row (the client never caught up) before it is disconnected
    send_timeout_s: float = 5.0  # one message that takes longer to leave disconnects the client
    socket_send_buffer: int = 128 * 1024  # the kernel's send buffer per connection: a stalled client fills it soon
    auth_timeout_s: float = 10.0  # time to send the auth message after connecting
    auth_failure_delay_s: float = 0.5  # a wrong token is answered after this long
    auth_retry_after_s: float = 2.0  # and that address may not try again for this long


class TokenBucket:
    """`take()` is True while the client stays within `rate` per second with bursts up to `burst`."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate, self.burst, self.clock = float(rate), float(burst), clock
        self.tokens = float(burst)
        self._at = clock()

    def take(self) -> bool:
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self._at) * self.rate)
        self._at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


# ---------------------------------------------------------------- the token

def token_path() -> Path:
    return user_config_dir() / TOKEN_FILE


def _write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read, atomically (a temp file made 0600 before any byte is in it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    descriptor = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, OWNER_ONLY)
    try:
        os.fchmod(descriptor, OWNER_ONLY)
        os.write(descriptor, text.encode("ascii"))
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
    os.replace(temp, path)


def new_token(path: Path | None = None) -> str:
    """Make a new token (the old one stops working at the next connection) and store it, owner-only."""
    token = secrets.token_urlsafe(32)
    _write_private(path or token_path(), token + "\n")
    return token


def load_or_create_token(path: Path | None = None) -> str:
    """The stored token, made on first use; a token file others could read is tightened to owner-only."""
    path = path or token_path()
    try:
        token = path.read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return new_token(path)
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{path}: cannot read the API token ({error}); delete the file to make a new one") from None
    if len(token) < 16:
        raise ValueError(f"{path}: the API token is {len(token)} characters, at least 16 needed; "
                         "run `avatar-studio serve --new-token`")
    if os.name == "posix" and stat.S_IMODE(path.stat().st_mode) & 0o077:
        os.chmod(path, OWNER_ONLY)
    return token


def token_matches(expected: str, given: object) -> bool:
    """Constant-time comparison, so the time taken says nothing about how much of a guess was right."""
    return isinstance(given, str) and hmac.compare_digest(expected.encode(), given.encode("utf-8", "replace"))


# ---------------------------------------------------------------- client names

class ClientNames:
    """Approved and denied client names, kept in `api-clients.json` in the user config folder."""

    def __init__(self, path: Path | None = None, require_approval: bool | None = None,
                 approver: Callable[[str], tuple[bool, str]] | None = None) -> None:
        """`require_approval` overrides the file's setting for this run only (the file keeps its own);
        `approver(name)` -> (admitted, why not) is asked, off the event loop, about a name never approved."""
        self.path = path or user_config_dir() / CLIENTS_FILE
        self.approver = approver
        self._lock = threading.Lock()
        self.approved: set[str] = set()
        self.denied: set[str] = set()
        self._stored_require_approval = False
        self._load()
        self.require_approval = self._stored_require_approval if require_approval is None else bool(require_approval)

    def _load(self) -> None:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return
        except (OSError, ValueError) as error:
            raise ValueError(f"{self.path}: not a valid client list ({error}); fix or delete it") from None
        if not isinstance(data, dict) or not all(isinstance(data.get(key, []), list) for key in ("approved", "denied")):
            raise ValueError(f"{self.path}: expected {{\"require_approval\": bool, \"approved\": [names], \"denied\": [names]}}")
        self.approved = {str(name) for name in data.get("approved", [])}
        self.denied = {str(name) for name in data.get("denied", [])}
        self._stored_require_approval = bool(data.get("require_approval", False))

    def save(self) -> None:
        with self._lock:
            data = {"require_approval": self._stored_require_approval, "approved": sorted(self.approved),
                    "denied": sorted(self.denied)}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, json.dumps(data, indent=2) + "\n")

    def approve(self, name: str) -> None:
        with self._lock:
            self.approved.add(name)
            self.denied.discard(name)
        self.save()

    def revoke(self, name: str) -> None:
        """Forget an approval: the name is asked about again (or refused) from its next connection on."""
        with self._lock:
            self.approved.discard(name)
        self.save()

    def approved_names(self) -> list[str]:
        with self._lock:
            return sorted(self.approved)

    def deny(self, name: str) -> None:
        with self._lock:
            self.denied.add(name)
            self.approved.discard(name)
        self.save()

    def decide(self, name: str) -> tuple[bool, str]:
        """(admitted, why not): may be slow when it asks the approver, so call it off the event loop."""
        if name in self.denied:
            return False, f"client {name!r} is denied; `avatar-studio serve --approve {name!r}` allows it again"
        if name in self.approved or not self.require_approval:
            return True, ""
        approver = self.approver
        if approver is None:
            return False, f"client {name!r} is not approved; approve it with `avatar-studio serve --approve {name!r}`"
        admitted, why = approver(name)
        if not admitted:
            return False, f"client {name!r} is not approved: {why}"
        self.approve(name)
        return True, ""


# ---------------------------------------------------------------- folders

def media_dir() -> Path:
    """Where clients put audio files for `play` by default."""
    return user_data_dir() / "media"


class PathNotAllowed(ValueError):
    """A path that resolves outside every allowed folder (or does not exist)."""


class AllowedFolders:
    """The folders a client's paths must stay in, symlinks resolved on both sides."""

    def __init__(self, folders: Iterable[str | os.PathLike] | None = None) -> None:
        chosen = list(folders) if folders is not None else [media_dir(), recordings_dir()]
        if not chosen:
            raise ValueError("at least one allowed folder is needed")
        self.folders = [Path(folder).expanduser().resolve() for folder in chosen]

    def resolve(self, text: str) -> Path:
        """The existing file `text` names, resolved; PathNotAllowed says where it led when that is outside."""
        if "\x00" in text:
            raise PathNotAllowed("path holds a NUL character")
        path = Path(text).expanduser()
        if not path.is_absolute():
            path = self.folders[0] / path
        try:
            real = path.resolve(strict=True)
        except FileNotFoundError:
            raise PathNotAllowed(f"{text}: no such file") from None
        except (OSError, RuntimeError) as error:  # a symlink loop, a name too long
            raise PathNotAllowed(f"{text}: cannot be resolved ({error})") from None
        if not any(real.is_relative_to(folder) for folder in self.folders):
            allowed = ", ".join(str(folder) for folder in self.folders)
            raise PathNotAllowed(f"{text} resolves to {real}, outside the allowed folders ({allowed})")
        if not real.is_file():
            raise PathNotAllowed(f"{text}: not a file")
        return real


def is_loopback(host: str) -> bool:
    """Whether binding `host` keeps the API on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
