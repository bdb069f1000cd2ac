"""Standard-library modules a driver imports at module level but uses only in calls the
runner never makes: their import is deferred until something reads one of their names.

Every runner Job pays its driver's import before the first database round trip. psycopg
imports ``asyncio`` (for a few names read on import, and for its async connections),
``ctypes.util`` and so ``ctypes`` (to find libpq by name, which the binary build never
does) and ``ssl`` (libpq does its own TLS): a large share of the driver's import, for
nothing a synchronous runner runs. :class:`Deferred` is a meta-path finder that hands
back such a module unexecuted: its code runs, in the same module object, on the first
read of a name it does not hold yet (as ``importlib.util.LazyLoader`` does), and the
names listed as *seeds* are bound up front from the small submodule that defines them,
so reading those loads only that submodule: ``asyncio.CancelledError`` is bound from
``asyncio.exceptions``, the very class ``asyncio`` itself exports.

A deferred module behaves as the module once loaded: same object in ``sys.modules``,
same names, the same class identity of everything. Loading is serialised: another
thread reading a name while one loads it waits for the load, and a read by the loading
code itself (a submodule's ``from . import x``) sees the partial module, as in a plain
import. (A thread importing one of the module's submodules by name while another thread
loads the module could wait on it for good; the runner and the CLI import on one thread.)

No library does this: ``importlib.util.LazyLoader`` runs the module on any read, and
``from asyncio import CancelledError`` in psycopg's import is one.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import sys
import threading
import types
from collections.abc import Mapping, Sequence
from typing import Any, Protocol


class _Loader(Protocol):
    """A module loader (``importlib.abc.Loader``, whose import costs more than it saves)."""

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None: ...

    def exec_module(self, module: types.ModuleType) -> None: ...


class _DeferredModule(types.ModuleType):
    """A module whose code has not run yet; its first unknown name runs it."""

    def __getattr__(self, name: str) -> Any:  # only for names not bound yet
        state: _State = self.__dict__["__ptah_deferred__"]
        state.load(self)
        return getattr(self, name)


class _State:
    def __init__(self, loader: _Loader) -> None:
        self.loader = loader
        self.lock = threading.RLock()
        self.loading = False

    def load(self, module: types.ModuleType) -> None:
        with self.lock:
            if self.loading:  # the module's own code, mid-load: a plain partial module
                raise AttributeError(module.__name__)
            if type(module) is not _DeferredModule:  # another thread loaded it meanwhile
                return
            self.loading = True
            try:
                self.loader.exec_module(module)
            finally:
                self.loading = False
            module.__class__ = types.ModuleType  # type: ignore[assignment]
            module.__dict__.pop("__ptah_deferred__", None)


class Deferred:
    """Defers the modules of ``seeds`` (name -> {seed name: submodule defining it}).

    Leaves ``sys.meta_path`` once each module was found; a module already imported
    when this finder is installed is left as it is."""

    def __init__(self, seeds: Mapping[str, Mapping[str, str]]) -> None:
        self.seeds = {n: dict(s) for n, s in seeds.items() if n not in sys.modules}
        self.loaders: dict[str, _Loader] = {}
        self.found: set[str] = set()

    def install(self) -> None:
        if self.seeds and self not in sys.meta_path:
            sys.meta_path.insert(0, self)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.seeds or fullname in self.found:
            return None
        self.found.add(fullname)
        if len(self.found) == len(self.seeds) and self in sys.meta_path:
            sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        loader: Any = spec.loader if spec is not None else None
        if spec is None or not hasattr(loader, "exec_module"):
            return spec  # not found here, or nothing to defer: imported as it is
        self.loaders[fullname] = loader
        spec.loader = self  # type: ignore[assignment]  # a loader by protocol
        return spec

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.loaders[spec.name].create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        name = module.__name__
        state = _State(self.loaders[name])
        module.__dict__["__ptah_deferred__"] = state
        module.__class__ = _DeferredModule
        with state.lock:  # the seeds' submodules see a partial module, as in a plain import
            state.loading = True
            try:
                for seed, where in self.seeds[name].items():
                    setattr(module, seed, getattr(importlib.import_module(where), seed))
            finally:
                state.loading = False
