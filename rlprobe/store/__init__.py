"""The read side: locate runs, create the SQL views in DuckDB, typed readers over them."""

from rlprobe.store.engine import Store, connect, init_script, open_store, resolve
from rlprobe.store.reader import RunReader, RunView, list_runs, load_manifest

__all__ = ["RunReader", "RunView", "Store", "connect", "init_script", "list_runs", "load_manifest", "open_store", "resolve"]
