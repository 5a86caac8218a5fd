"""The driver JVM's class archive: a local Spark session starts in about half the time.

Starting a session, the JVM loads, verifies and links the classes of Spark, Scala and Hadoop
(most of the 7 to 8 seconds a session takes on a 2-core machine), and its first queries load
more (about a second). The JDK can map such classes from an archive instead (dynamic
class-data sharing, ``-XX:SharedArchiveFile``), which a JVM writes as it exits
(``-XX:ArchiveClassesAtExit``). So the first local session on a machine writes one: its JVM
then takes 15 to 30 s more to exit, once. Every later session maps it: on a 2-core machine its
creation fell from about 7.5 to 4 s, its first query from 2.2 to 1.2 s.

The archive fits one Java, one Spark install and one set of JVM options: its file name
carries a digest of them, so another install writes its own. A JVM that finds an archive it
cannot map (another JDK build, a damaged file) starts as it would without it. One process
writes at a time (a lock file beside the archive); the others start as before meanwhile. A
process killed while its JVM wrote leaves a lock and a half-written archive (170 MB or so):
whichever session starts next removes them, for any install or options. The archives of the
three installs used last are kept, the older ones removed.

Where: ``$XDG_CACHE_HOME/neardup`` (``~/.cache/neardup``), or the directory that
``NEARDUP_CLASS_ARCHIVE`` names; ``NEARDUP_CLASS_ARCHIVE=off`` turns it off.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

__all__ = ["ClassArchive"]

#: the environment variable that moves the archive's directory, or turns it off
SETTING = "NEARDUP_CLASS_ARCHIVE"
#: the JDK's messages about its archive: a JVM that cannot map one says so on stdout
_QUIET = "-Xlog:cds*=off"
#: a lock that names no process (cut short as it was written) is stale after this long
_STALE_SECONDS = 600
#: archives kept besides the one being written (about 190 MB each), the ones used last
KEPT = 3
#: how long a JVM may take to write the archive as it exits (15 to 30 s on 2 cores)
_WRITE_SECONDS = 300


class ClassArchive:
    """The class archive of a session about to start: the JVM options that map it, or that
    write it at exit; :meth:`keep` then waits for that JVM to exit and keeps what it wrote.

    >>> ClassArchive.from_environ({SETTING: "off"}, "-Xmx1g") is None
    True
    """

    def __init__(self, directory: Path, fits: str) -> None:
        """``fits``: what the archive is for (the install and the JVM options), digested into
        its name."""
        self.directory = directory
        self.path = directory / f"spark-{_digest(fits)}.jsa"
        self._lock = self.path.with_suffix(".lock")
        self._writing: Path | None = None

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None, options: str) -> ClassArchive | None:
        """The archive for a JVM started with ``options`` (None when turned off); the digest
        also covers the environment that picks Java or adds to Spark's class path."""
        environ = dict(os.environ if environ is None else environ)
        setting = environ.get(SETTING, "")
        if setting.lower() == "off":
            return None
        if setting:
            directory = Path(setting).expanduser()
        else:
            cache = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
            directory = Path(cache) / "neardup"
        return cls(directory, _install(environ) + "\n" + options)

    def java_options(self) -> str:
        """``-XX:SharedArchiveFile`` when the archive exists; else ``-XX:ArchiveClassesAtExit``
        to a file of this process's own, when no other process is writing one (and the
        directory can be written); else nothing."""
        _clear_stale(self.directory)
        if self.path.is_file():
            try:
                os.utime(self.path)  # its time is when it was last used (see _prune)
            except OSError:
                pass
            return f"-XX:SharedArchiveFile={self.path} {_QUIET}"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            self._prune()
            descriptor = os.open(self._lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except OSError:  # another process writes it, or the directory is not ours to write
            return ""
        os.write(descriptor, str(os.getpid()).encode())
        os.close(descriptor)
        self._writing = self.path.with_name(f"{self.path.stem}.{uuid.uuid4().hex}.part")
        return f"-XX:ArchiveClassesAtExit={self._writing} {_QUIET}"

    @property
    def writing(self) -> bool:
        """Whether this process's JVM writes the archive as it exits."""
        return self._writing is not None

    def keep(self, jvm: subprocess.Popen[Any] | None) -> bool:
        """After the session stopped: end its JVM (it ends when its stdin closes), wait while it
        writes the archive, and put the archive in its place. True when kept."""
        if self._writing is None:
            return False
        part, self._writing = self._writing, None
        try:
            if jvm is not None and jvm.stdin is not None:
                jvm.stdin.close()
                jvm.wait(_WRITE_SECONDS)
            if jvm is not None and jvm.returncode == 0 and part.is_file():
                os.replace(part, self.path)
                return True
            return False
        except (OSError, subprocess.TimeoutExpired):
            return False
        finally:
            part.unlink(missing_ok=True)
            self._lock.unlink(missing_ok=True)

    def _prune(self) -> None:
        """Keep the archives of the :data:`KEPT` installs used last (each new virtual
        environment, each fresh clone that installs neardup, writes its own)."""
        archives = sorted(self.directory.glob("spark-*.jsa"), key=_used, reverse=True)
        for old in archives[KEPT:]:
            old.unlink(missing_ok=True)


def _clear_stale(directory: Path) -> None:
    """Remove the locks of processes that are gone, with the half-written archives of the same
    install and options (only a lock's holder writes one), and half-written archives that no
    lock covers: of every install, since a killed process's options may never come back."""
    try:
        stems = {part.name.split(".")[0] for part in directory.glob("spark-*.part")}
        stems |= {lock.stem for lock in directory.glob("spark-*.lock")}
    except OSError:
        return
    for stem in stems:
        lock = directory / f"{stem}.lock"
        try:
            text = lock.read_text().strip()
            age = time.time() - lock.stat().st_mtime
        except FileNotFoundError:  # no lock, no writer: any half-written archive is stale
            text, age = "", float("inf")
        except OSError:
            continue
        holder = int(text) if text.isdigit() else 0
        if (holder and not _alive(holder)) or (not holder and age > _STALE_SECONDS):
            try:
                lock.unlink(missing_ok=True)
                for part in directory.glob(f"{stem}.*.part"):
                    part.unlink(missing_ok=True)
            except OSError:  # not ours to remove
                pass


def _used(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # alive, someone else's
        return True
    return True


def _install(environ: dict[str, str]) -> str:
    """What names the Java and the Spark a session runs: the JVM binary (as spark-submit finds
    it) with its size and time, and Spark's version, location and class-path settings."""
    import pyspark

    home = environ.get("JAVA_HOME")
    if home:
        java = os.path.join(home, "bin", "java")
    else:
        java = shutil.which("java", path=environ.get("PATH"))
    parts = [pyspark.__version__, os.path.dirname(pyspark.__file__)]
    if java:
        real = os.path.realpath(java)
        stat = os.stat(real) if os.path.exists(real) else None
        parts += [real, f"{stat.st_size}:{stat.st_mtime_ns}" if stat else ""]
    parts += [environ.get(k, "") for k in ("SPARK_HOME", "SPARK_CLASSPATH", "PYSPARK_SUBMIT_ARGS",
                                            "JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS")]
    return "\n".join(parts)


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]
