"""ptah.engines.deferred: psycopg loads without running asyncio's event loop or
ctypes, and a deferred module is the module as soon as anything reads it.

Each case runs in a fresh interpreter: the deferral only acts on a first import."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _run(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def test_psycopg_loads_without_the_event_loop_or_ctypes() -> None:
    out = _run(
        """
        import sys
        import ptah.engines.postgres, psycopg
        from ptah.engines.deferred import _DeferredModule
        assert type(sys.modules["asyncio"]) is _DeferredModule
        assert type(sys.modules["ctypes.util"]) is _DeferredModule
        # ctypes, the package ctypes.util is in, is deferred too: psycopg reads neither.
        assert type(sys.modules["ctypes"]) is _DeferredModule
        for heavy in ("asyncio.base_events", "asyncio.unix_events", "asyncio.sslproto"):
            assert heavy not in sys.modules, heavy
        # A synchronous connection attempt works and loads neither.
        try:
            psycopg.connect("host=127.0.0.1 port=1 user=x dbname=x connect_timeout=2")
        except psycopg.OperationalError:
            pass
        assert "asyncio.base_events" not in sys.modules
        assert type(sys.modules["asyncio"]) is _DeferredModule
        assert type(sys.modules["ctypes"]) is _DeferredModule
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_a_deferred_module_is_the_module_once_read() -> None:
    out = _run(
        """
        import sys, types
        import ptah.engines.postgres, psycopg
        import asyncio, asyncio.exceptions, asyncio.tasks, asyncio.locks
        # The seeds are the module's own objects, before and after the load.
        seeded = asyncio.CancelledError
        assert psycopg.errors.CancelledError is asyncio.exceptions.CancelledError
        async def f():
            await asyncio.sleep(0)
            return 5
        assert asyncio.run(f()) == 5
        assert type(sys.modules["asyncio"]) is types.ModuleType
        assert "__ptah_deferred__" not in vars(asyncio)
        assert asyncio.CancelledError is seeded is asyncio.exceptions.CancelledError
        assert asyncio.Task is asyncio.tasks.Task and asyncio.Lock is asyncio.locks.Lock
        assert "base_events" in vars(asyncio) and hasattr(asyncio, "__all__")
        import ctypes.util
        assert ctypes.util.find_library("c")
        assert type(sys.modules["ctypes.util"]) is types.ModuleType
        assert ctypes.c_int(7).value == 7 and ctypes.util is sys.modules["ctypes.util"]
        assert type(sys.modules["ctypes"]) is types.ModuleType
        from ctypes import CDLL
        assert CDLL is ctypes.CDLL and "_endian" in vars(ctypes)
        # A name the module does not have is still an AttributeError.
        try:
            asyncio.no_such_name
        except AttributeError:
            print("ok")
        """
    )
    assert out.strip() == "ok"


def test_threads_reading_a_deferred_module_at_once_all_see_it_loaded() -> None:
    out = _run(
        """
        import sys, threading
        import ptah.engines.postgres, psycopg
        asyncio = sys.modules["asyncio"]
        start = threading.Barrier(8)
        got, errors = [], []
        def read():
            start.wait()
            try:
                got.append(asyncio.get_event_loop_policy)
            except Exception as exc:
                errors.append(repr(exc))
        threads = [threading.Thread(target=read) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert len(got) == 8 and len(set(map(id, got))) == 1
        print("ok")
        """
    )
    assert out.strip() == "ok"


def test_a_module_imported_already_is_left_as_it_is() -> None:
    out = _run(
        """
        import sys, types, asyncio
        import ptah.engines.postgres, psycopg
        assert type(sys.modules["asyncio"]) is types.ModuleType
        print("ok")
        """
    )
    assert out.strip() == "ok"
