"""The hypothesis example database a run shares with other processes and machines (`--tdiff-database`).

A directory (on storage every machine mounts) is a `DirectoryBasedExampleDatabase`; a
`redis://host:port/db` URL (also `rediss://`, `unix://`) is hypothesis's `RedisExampleDatabase` on
that server. HypoFuzz keeps every fuzz target's examples, covering corpus and failures in the
default database of its collection session (`settings().database`, which every target must share):
`use_as_default` makes it that one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

REDIS_SCHEMES = ("redis://", "rediss://", "unix://")
PROFILE = "tdiff-database"


def open_database(spec: str, root: Path) -> Any:
    """The example database `spec` names: a directory (relative to `root`) or a Redis URL, checked to be
    usable now. Raises ValueError naming --tdiff-database."""
    from hypothesis.database import DirectoryBasedExampleDatabase

    spec = spec.strip()
    if spec.startswith(REDIS_SCHEMES):
        return _redis(spec)
    if "://" in spec:
        raise ValueError(f"--tdiff-database {spec!r}: give a directory or a redis://host:port/db URL "
                         f"(schemes: {', '.join(s[:-3] for s in REDIS_SCHEMES)})")
    path = Path(spec).expanduser()
    path = path if path.is_absolute() else Path(root) / path
    if path.exists() and not path.is_dir():
        raise ValueError(f"--tdiff-database {spec!r}: {path} exists and is not a directory")
    return DirectoryBasedExampleDatabase(str(path))


def _redis(url: str) -> Any:
    try:
        import redis
        from hypothesis.extra.redis import RedisExampleDatabase
    except ImportError:
        raise ValueError(f"--tdiff-database {url!r}: needs the redis package (pip install 'tdiff[fuzz]', "
                         "or pip install redis)") from None
    try:
        client = redis.Redis.from_url(url, socket_connect_timeout=10)
    except ValueError as exc:
        raise ValueError(f"--tdiff-database {url!r}: not a Redis URL ({exc})") from None
    try:
        client.ping()
    except redis.RedisError as exc:
        raise ValueError(f"--tdiff-database {url!r}: cannot reach the Redis server ({type(exc).__name__}: "
                         f"{exc})") from None
    return RedisExampleDatabase(client)


def describe(db: Any) -> str:
    """Where an example database keeps its examples, for the run's header."""
    path = getattr(db, "path", None)
    if path is not None:
        return str(path)
    pool = getattr(getattr(db, "redis", None), "connection_pool", None)
    kw = getattr(pool, "connection_kwargs", None) or {}
    if "host" in kw:
        return f"redis://{kw['host']}:{kw.get('port', 6379)}/{kw.get('db', 0)}"
    return type(db).__name__


def use_as_default(db: Any) -> None:
    """Make `db` the default example database of this process (hypothesis profile `tdiff-database`, on
    top of the profile loaded before), with derandomize off (a derandomized test uses no database).

    It stays loaded after the pytest session: HypoFuzz reads `settings().database` once its
    collection session has ended."""
    from hypothesis import settings

    settings.register_profile(PROFILE, parent=settings(), database=db, derandomize=False)
    settings.load_profile(PROFILE)
