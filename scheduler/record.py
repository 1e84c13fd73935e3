"""The last-run record (an atomically replaced JSON file) and the cross-process run lock.

``<home>/nightly.json`` remembers which nightly *slot* (the scheduled fire time and its local
date) was last run and how it went, so that

* a host that slept through 02:30 runs the missed slot once when the scheduler starts, and a
  second process (or a second start) sees the slot as done;
* on a fall-back night whose 02:30 happens twice, the second firing finds the local date
  already served and does nothing;
* ``amem status`` can show the last run, the last success and the last error.

``<home>/nightly_runs.jsonl`` is the run history, and ``<home>/nightly_end.json`` the run's end
written in place where neither the record nor the history could be replaced
(``scheduler.endnote``); :func:`load_settled` brings the record up to date from them.

``<home>/nightly.lock`` is held with ``fcntl.flock`` for the length of a run: two processes
(the server and a standalone ``amem scheduler``), or two threads, never run the job at once.
The lock dies with its process, so a crashed run never blocks the next night.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, Callable

from amem.atomicfile import write_text_atomic
from amem.kernel.errors import DiskFullError
from amem.kernel.files import open_private, private_dir

from .endnote import read_end_note

log = logging.getLogger(__name__)

VERSION = 1

#: how a write of the record, the history or the refusal fails: the system's errors, and a full
#: disk as ``amem.atomicfile`` names it (a ``DiskFullError``, which is no ``OSError``: caught
#: as one alone, a full disk at the end of a run crashed it, its report lost)
WRITE_ERRORS: tuple[type[Exception], ...] = (OSError, DiskFullError)


def read_record(path: Path, runs_path: Path | None = None,
                end_path: Path | None = None) -> dict[str, Any]:
    """The record, or ``{}`` when there is none. Corrupt parts are logged and left out. With
    ``runs_path``, brought up to date with the run history and the run's end note
    ``end_path`` (:func:`load_settled`)."""
    record, problems = (load_record(path) if runs_path is None
                        else load_settled(path, runs_path, end_path))
    for problem in problems:
        log.warning("the nightly record %s: %s; it is replaced on the next write", path, problem)
    return record


def load_record(path: Path) -> tuple[dict[str, Any], list[str]]:
    """The usable part of the record and what was wrong with the rest.

    The file is ours but sits in the user's home: a hand edit or a disk error must not crash
    ``amem status`` or ``amem serve``. A field of the wrong type is dropped (as if the record
    never had it: the worst case is one extra catch-up run); the next write replaces the file.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}, []
    except (OSError, UnicodeDecodeError) as exc:
        return {}, [f"cannot be read ({exc})"]
    try:
        data = json.loads(text)
    except ValueError as exc:
        return {}, [f"is not valid JSON ({exc})"]
    if not isinstance(data, dict):
        return {}, [f"is a JSON {type(data).__name__}, not an object"]
    problems: list[str] = []
    clean: dict[str, Any] = {}
    for key, value in data.items():
        why = _FIELD_CHECKS[key](value) if key in _FIELD_CHECKS else None
        if why is None:
            clean[key] = value
        else:
            problems.append(f"field {key!r} {why}")
    return clean, problems


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _moment(value: Any) -> str | None:
    """None when ``value`` is an ISO time with a zone (slot comparisons need the zone)."""
    if not isinstance(value, str):
        return f"must be an ISO date-time string, got {type(value).__name__}"
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return f"is not an ISO date-time: {value[:40]!r}"
    return None if parsed.tzinfo is not None else "has no time zone"


def _optional(check: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
    return lambda value: None if value is None else check(value)


def _object(**fields: Callable[[Any], str | None]) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if not isinstance(value, dict):
            return f"must be an object, got {type(value).__name__}"
        for name, field_check in fields.items():
            why = field_check(value.get(name))
            if why is not None:
                return f"has {name!r} that {why}"
        return None
    return check


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) else f"must be a string, got {type(value).__name__}"


def _count(value: Any) -> str | None:
    return None if _is_int(value) and value >= 0 else f"must be a count, got {value!r}"


_FIELD_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "version": lambda v: None if _is_int(v) else f"must be an integer, got {v!r}",
    "first_seen": _moment,
    "last_success_at": _optional(_text),
    "consecutive_failures": _count,
    "last_slot": _object(date=_optional(_text), status=_optional(_text), slot=_optional(_text)),
    "last_run": _object(status=_optional(_text), error=_optional(_text),
                        pid=_optional(lambda v: None if _is_int(v) else "must be an integer")),
    "scheduler": _object(schedule=_optional(_text), host=_optional(_text), process=_optional(_text),
                         pid=_optional(lambda v: None if _is_int(v) else "must be an integer")),
}


def write_refused(path: Path, refusal: dict[str, Any]) -> None:
    """Replace the record of the latest refused slot (``scheduler.job.record_refused``)."""
    write_text_atomic(path, json.dumps(refusal, indent=2, sort_keys=True) + "\n")


def read_refused(path: Path) -> dict[str, Any] | None:
    """The latest refused slot, or None (no file, or one that is not usable: logged)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("the nightly refusal record %s is not usable (%s); ignoring it", path, exc)
        return None
    if not isinstance(data, dict) or _moment(data.get("slot")) or _moment(data.get("at")):
        log.warning("the nightly refusal record %s is not usable; ignoring it", path)
        return None
    return data


#: how many finished runs ``nightly_runs.jsonl`` keeps (about a year of nights)
RUNS_KEPT = 400


def append_run(path: Path, entry: dict[str, Any], *, keep: int = RUNS_KEPT) -> None:
    """Add one finished run to the run history (one JSON object a line, the newest last,
    the oldest dropped beyond ``keep``); the inspector plots it. Replaced atomically, so a
    reader never sees half a line."""
    runs = read_runs(path)[-(keep - 1):] if keep > 1 else []
    runs.append(entry)
    write_text_atomic(path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in runs))


def read_runs(path: Path) -> list[dict[str, Any]]:
    """The run history, oldest first; a line that is not a JSON object is skipped and logged."""
    return read_runs_checked(path)[0]


def read_runs_checked(path: Path) -> tuple[list[dict[str, Any]], list[int]]:
    """The run history, oldest first, and the numbers of the lines skipped (not a JSON object,
    or not UTF-8 text), so that a reader can say so instead of only the log."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return [], []
    runs: list[dict[str, Any]] = []
    skipped: list[int] = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            item = json.loads(line)
        except ValueError:
            item = None
        if isinstance(item, dict):
            runs.append(item)
        elif line.strip():
            skipped.append(number)
            log.warning("the nightly run history %s: line %d is not a JSON object; skipped", path, number)
    return runs, skipped


def load_settled(path: Path, runs_path: Path,
                 end_path: Path | None = None) -> tuple[dict[str, Any], list[str]]:
    """:func:`load_record`, brought up to date with the run history: a run that finished but
    could not write the record at its end (a full disk, a read-only one, a directory in its
    place) appended its line to ``runs_path`` all the same (``scheduler.job._finish``), and
    wrote its end into ``end_path`` in place (``scheduler.endnote``), which takes no new
    space where the history's replacement did.

    The record alone said that run was still ``running``: ``amem status`` called it
    ``interrupted`` and the next start ran the night again. When the newest of the two (one
    that says when it started) began after the record's last run, or is that run, and the
    record does not say it finished, the run is taken as it says (its status, times, slot),
    and a problem says the record is behind (``amem doctor`` shows it); the next written record
    holds it. When the record says its run is running and the end note cannot be read, a
    problem says that whether the run finished cannot be known.
    """
    record, problems = load_record(path)
    try:
        runs, _ = read_runs_checked(runs_path)
    except OSError as exc:  # a directory in its place, a disk error: the record still counts
        runs = []
        problems.append(f"cannot be checked against the run history {runs_path.name}, which cannot be "
                        f"read ({exc})")
    latest, source = (runs[-1] if runs else {}), f"the run history {runs_path.name}"
    last = record.get("last_run") or {}
    if end_path is not None:
        note, why = read_end_note(end_path)
        if note is not None and note.get("status") != "running" and _began_later(note, latest):
            latest, source = note, (f"the run's end note {end_path.name} (neither the record nor "
                                    f"the run history could be written then)")
        elif why is not None and last.get("status") == "running":
            problems.append(f"says the run started {last.get('started_at')} is running, and the run's end "
                            f"note {end_path.name} {why}: whether that run finished cannot be known, so "
                            "unless a process runs it now the next start runs that night again")
    began = latest.get("started_at")
    if not isinstance(began, str) or _moment(began) is not None or not isinstance(latest.get("status"), str):
        return record, problems  # an old line (no start time): the record says it all
    known = last.get("started_at")
    newer = (isinstance(known, str) and _moment(known) is None
             and datetime.fromisoformat(known) > datetime.fromisoformat(began))
    if newer or (known == began and last.get("status") != "running"):
        return record, problems  # the record is as new as the history
    fields = ("status", "reason", "slot", "slot_date", "started_at", "finished_at", "duration")
    record = {**record, "last_run": {**(last if known == began else {}),
                                     **{k: latest[k] for k in fields if latest.get(k) is not None}}}
    if isinstance(latest.get("slot_date"), str):
        record["last_slot"] = {"slot": latest.get("slot"), "date": latest["slot_date"], "status": latest["status"]}
    if latest["status"] == "ok":
        record["last_success_at"], record["consecutive_failures"] = latest.get("finished_at"), 0
    problems.append(f"is behind {source}: the run started {began} finished "
                    f"{latest['status']} at {latest.get('finished_at')}, but the record could not be written then "
                    "(the run counts as done)")
    return record, problems


def _began_later(entry: dict[str, Any], than: dict[str, Any]) -> bool:
    """Whether run ``entry`` started after run ``than`` (one without a usable start is older)."""
    began, other = entry.get("started_at"), than.get("started_at")
    if not isinstance(began, str) or _moment(began) is not None:
        return False
    if not isinstance(other, str) or _moment(other) is not None:
        return True
    return datetime.fromisoformat(began) > datetime.fromisoformat(other)


def write_record(path: Path, record: dict[str, Any]) -> None:
    """Replace the record atomically: a reader sees the old file or the new one, never half."""
    record = {**record, "version": VERSION}
    write_text_atomic(path, json.dumps(record, ensure_ascii=False, indent=1, sort_keys=True,
                                       default=str))


class RunLock:
    """A non-blocking exclusive ``flock`` on ``<home>/nightly.lock``, holding the owner's pid.

    ``acquire()`` returns False (and sets ``holder_pid`` when readable) if someone holds it.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.holder_pid: int | None = None
        self._fd: int | None = None

    def acquire(self) -> bool:
        private_dir(self.path.parent)
        fd = open_private(self.path, os.O_RDWR | os.O_CREAT)  # 0600; a planted link is refused
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self.holder_pid = _read_pid(fd)
            os.close(fd)
            return False
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd
        return True

    def release(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            try:
                os.ftruncate(fd, 0)
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def __enter__(self) -> "RunLock":
        self.acquire()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.release()


def lock_holder(path: Path) -> int | None:
    """The pid running the job now, or None when nobody holds the lock."""
    if not path.exists():
        return None
    probe = RunLock(path)
    if probe.acquire():
        probe.release()
        return None
    return probe.holder_pid or -1


def process_identity(pid: int) -> str | None:
    """What tells process ``pid`` from a later one given the same pid: ``<boot id>:<start>``,
    its start in clock ticks since boot (``/proc/<pid>/stat``, field 22) on this boot. None
    where ``/proc`` does not say (not Linux, or no such process).

    A pid alone is reused: a scheduler that stopped left its pid in the record, and the next
    process given it made the stopped scheduler look alive (``scheduler.status``).
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
        boot = Path("/proc/sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return None
    # the name (field 2) is in parentheses and may hold spaces or ')': split after the last one
    fields = stat[stat.rfind(")") + 2:].split()
    return f"{boot}:{fields[19]}" if len(fields) > 19 else None  # fields[0] is field 3


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text else None
    except (OSError, ValueError):
        return None
