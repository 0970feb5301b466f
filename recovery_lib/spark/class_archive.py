"""A class-data archive of the driver JVM (HotSpot AppCDS): Spark's classes as the JVM laid
them out after a representative run, mapped at the next JVM start instead of loaded and
verified one by one. Every restart of a job starts a JVM, so this is time off every native
restart (measured on this machine: a SparkSession up ~2-4 s sooner out of ~9-12 s).

``recovery spark archive`` (run by ``make install``) makes it: a JVM started with
``-XX:ArchiveClassesAtExit`` builds a session and runs a small streaming aggregate, and the
archive is written when that JVM exits. ``build_session`` then starts drivers with
``-XX:SharedArchiveFile``. The archive's name holds the PySpark and Java versions and the jars'
directory, so an upgrade or a moved virtualenv uses no stale archive (and a JVM that finds an
archive it cannot map starts without it: a missing archive costs nothing but the time).
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from recovery_lib.errors import SparkUnavailable
from recovery_lib.settings import Settings, get_settings

log = logging.getLogger(__name__)

ARCHIVE_JAVA_OPTION = "-XX:SharedArchiveFile"
DUMP_JAVA_OPTION = "-XX:ArchiveClassesAtExit"


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", "java").exists():
        return str(Path(home, "bin", "java"))
    return shutil.which("java")


@functools.cache
def java_version() -> str | None:
    """The version of the java Spark's launcher runs (None: no java found): from the JDK's
    ``release`` file, else from ``java -version`` (a JVM start: once per process)."""
    java = _java()
    if java is None:
        return None
    release = Path(java).resolve().parent.parent / "release"
    text = release.read_text(errors="replace") if release.exists() else ""
    found = re.search(r'^JAVA_RUNTIME_VERSION="([^"]+)"', text, re.MULTILINE)
    if found:
        return found.group(1)
    try:
        text = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        ).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    found = re.search(r'version "([^"]+)"', text)
    return found.group(1) if found else None


def archive_path(settings: Settings | None = None) -> Path | None:
    """Where this installation's archive is (None: no java to make one for)."""
    import pyspark

    settings = settings or get_settings()
    version = java_version()
    if version is None:
        return None
    jars = Path(pyspark.__file__).parent / "jars"
    place = hashlib.sha1(str(jars.resolve()).encode()).hexdigest()[:8]
    return settings.home / "jvm" / f"spark-{pyspark.__version__}-java{version}-{place}.jsa"


def driver_java_options(settings: Settings | None = None) -> str | None:
    """The driver JVM's option that maps the archive, if there is one and it is wanted."""
    settings = settings or get_settings()
    if not settings.spark_class_archive:
        return None
    path = archive_path(settings)
    if path is None or not path.exists():
        return None
    return f"{ARCHIVE_JAVA_OPTION}={path}"


def create(settings: Settings | None = None, timeout_s: float = 300.0) -> Path:
    """Make the archive (a JVM of its own, in a child process); returns its path. The JVM
    writes into a temporary file that is renamed when complete, so a concurrent or a killed
    maker leaves no half-written archive behind."""
    settings = settings or get_settings()
    path = archive_path(settings)
    if path is None:
        raise SparkUnavailable(
            "no java found (JAVA_HOME or PATH): Spark cannot start either; install a JDK (17)"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    os.close(fd)
    os.unlink(tmp)  # the JVM creates it
    try:
        done = subprocess.run(
            [sys.executable, "-m", "recovery_lib.spark.session", "--archive-classes-to", tmp],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        if done.returncode != 0 or not Path(tmp).exists():
            tail = "\n".join(done.stderr.strip().splitlines()[-5:])
            raise SparkUnavailable(f"the archiving JVM failed (exit {done.returncode}): {tail}")
        os.replace(tmp, path)
    finally:
        Path(tmp).unlink(missing_ok=True)
    log.debug("class-data archive written: %s (%.0f MB)", path, path.stat().st_size / 1e6)
    return path
