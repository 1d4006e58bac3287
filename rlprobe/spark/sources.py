"""The Spark side of sql/v1/sources: the same source views, read with spark.read.

Each mirrors its DuckDB file (columns, order and rules), because the transpiled views rely on
exactly those:

- src_steps: every steps/part-*.parquet and steps.parquet below the root, schemas merged by
  name (mergeSchema), every fixed StepRecord column present with its type (NULL where nobody
  logged it). A recording that has steps.parquet ignores its parts, decided per file.
- src_samples: every samples/shard-*.parquet, rank filled from the rank-NNN folder when absent.
- src_events: every events.jsonl line that parses and has a kind; data stays JSON text.
- src_manifest: every run's manifest.json (rank folders excluded), parsed from its text so one
  broken manifest cannot hide the others; a newer recording format fails every query over it.
- src_rollout_trace: every rollout_trace.jsonl line that is a JSON object with a string event,
  seq its line number in the file, typed as the DuckDB source types it. Only the files named
  rollout_trace.jsonl below the root: DuckDB's rlprobe_rollout_traces (extra trace files bound
  to runs) is a session variable with no Spark counterpart.

Files are found by Spark itself (recursiveFileLookup + pathGlobFilter), so a root can be any
path Spark reads (hdfs://, s3a://, ...). Spark skips files whose names start with '.' or '_',
which keeps the recorder's hidden temp files out, as DuckDB's globs do.
"""

from __future__ import annotations

from typing import Any, Callable

from rlprobe.errors import UPGRADE_HINT
from rlprobe.layout import SEALED
from rlprobe.schemas import EVENT_COLUMN_TYPES, SAMPLE_COLUMN_TYPES, SCHEMA_VERSION, STEP_COLUMN_TYPES

_SPARK_TYPES = {
    "BIGINT": "bigint",
    "DOUBLE": "double",
    "VARCHAR": "string",
    "BOOLEAN": "boolean",
    "JSON": "string",
    "DOUBLE[]": "array<double>",
    "BIGINT[]": "array<bigint>",
    "VARCHAR[]": "array<string>",
}
_REC_DIR = (
    r"^(.*)/(manifest\.json|steps\.parquet|steps/part-[^/]*\.parquet|samples/shard-[^/]*\.parquet|events\.jsonl)$"
)


# columns the builders add for their own use, never passed on as metric columns
_HELPERS = {"filename", "rec_dir", "run_dir", "file_rank", "rank", "compacted", "_row_index", "_write_order"}


def spark_type(duckdb_type: str) -> str:
    """The Spark type of one of the schema's DuckDB column types."""
    return _SPARK_TYPES[duckdb_type]


def _q(name: str) -> str:
    return f"`{name}`"


def _path_columns(df: Any) -> Any:
    """Add filename, rec_dir, run_dir and rank (from the rank-NNN folder) as DuckDB's macros do."""
    from pyspark.sql import functions as F

    # Spark gives a URI (file:/abs/path, percent-encoded); DuckDB's filename is the plain path
    path = F.regexp_replace(F.col("_metadata.file_path"), r"^file:(//)?", "")
    path = F.url_decode(F.regexp_replace(path, r"\+", "%2B"))
    rec_dir = F.regexp_extract(F.col("filename"), _REC_DIR, 1)
    return (
        df.withColumn("filename", path)
        .withColumn("rec_dir", rec_dir)
        .withColumn("run_dir", F.regexp_replace(F.col("rec_dir"), r"/rank-[0-9]+$", ""))
        .withColumn(
            "file_rank",
            F.coalesce(F.expr(r"TRY_CAST(regexp_extract(rec_dir, '/rank-([0-9]+)$', 1) AS BIGINT)"), F.lit(0)),
        )
    )


def _read(spark: Any, root: str, glob: str, load: Callable[[Any, str], Any]) -> Any | None:
    """Every file named like glob below root, loaded by load(reader, root); None when there is none."""
    from pyspark.errors import AnalysisException

    reader = spark.read.option("recursiveFileLookup", "true").option("pathGlobFilter", glob)
    try:
        return load(reader, root)
    except AnalysisException as exc:  # no file matched: the view is empty, not an error
        if any(key in str(exc) for key in ("UNABLE_TO_INFER_SCHEMA", "PATH_NOT_FOUND", "does not exist")):
            return None
        raise


def options_schema(types: dict[str, str]) -> str:
    """A DDL schema string for spark.read.schema()."""
    return ", ".join(f"{_q(name)} {spark_type(t)}" for name, t in types.items())


def _typed(df: Any, types: dict[str, str], leave_out: tuple[str, ...] = ()) -> list[Any]:
    """The fixed columns in the schema's order (cast, or NULL when absent), then the others."""
    from pyspark.sql import functions as F

    present = set(df.columns)
    cols = [
        (F.col(_q(n)).cast(spark_type(t)) if n in present else F.lit(None).cast(spark_type(t))).alias(n)
        for n, t in types.items()
        if n not in leave_out
    ]
    fixed = set(types) | _HELPERS
    cols += [F.col(_q(n)) for n in df.columns if n not in fixed]
    return cols


def steps(spark: Any, root: str) -> Any:
    """src_steps: step rows of every recording below root (compacted file over parts)."""
    from pyspark.sql import functions as F

    df = _read(spark, root, "{part-*,steps}.parquet", lambda r, p: r.parquet(p, mergeSchema=True))
    if df is None:
        return spark.createDataFrame(
            [], options_schema({**STEP_COLUMN_TYPES, "rec_dir": "VARCHAR", "run_dir": "VARCHAR", "rank": "BIGINT", "filename": "VARCHAR"})
        )
    df = _path_columns(df).withColumn("_row_index", F.col("_metadata.row_index"))
    df = df.where(F.col("filename").rlike(r"/steps/part-[^/]*\.parquet$|/steps\.parquet$"))
    # which copy wins is decided per file, as in sql/v1/sources/30_src_steps.sql
    files = (
        df.select("filename", "rec_dir").distinct()
        .groupBy("rec_dir")
        .agg(F.max(F.col("filename").endswith("/steps.parquet").cast("int")).alias("compacted"))
    )
    df = df.join(files, "rec_dir").where((F.col("compacted") == 0) | ~F.col("filename").contains("/steps/part-"))
    # write order within a recording: the part index, then the row in its file
    part = F.coalesce(F.expr(r"TRY_CAST(regexp_extract(filename, '/part-([0-9]+)\\.parquet$', 1) AS BIGINT)"), F.lit(0))
    df = df.withColumn("_write_order", part * F.lit(4294967296) + F.col("_row_index"))
    typed = df.select(*_typed(df, STEP_COLUMN_TYPES), "rec_dir", "run_dir", F.col("file_rank").alias("rank"), "filename", "_write_order")
    return _merge_repeated_steps(typed)


def _merge_repeated_steps(df: Any) -> Any:
    """A step written more than once in a recording merged as compaction merges it: each column
    keeps its last non-NULL value in write order (sql/v1/sources/30_src_steps.sql). A step written
    once is its own row, so the merge leaves it as it is."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    everything = Window.partitionBy("rec_dir", "step").orderBy("_write_order").rowsBetween(
        Window.unboundedPreceding, Window.unboundedFollowing)
    latest = Window.partitionBy("rec_dir", "step").orderBy(F.col("_write_order").desc())
    keep = [c for c in df.columns if c not in ("rec_dir", "step", "_write_order")]
    merged = df.select(
        "rec_dir", "step", "_write_order",
        *[F.last(F.col(_q(c)), ignorenulls=True).over(everything).alias(c) for c in keep],
        F.row_number().over(latest).alias("_nth"),
    )
    return merged.where(F.col("_nth") == 1).select(*[F.col(_q(c)) for c in df.columns if c != "_write_order"])


def step_files(spark: Any, root: str) -> Any:
    """src_step_files: per step file src_steps reads, its rows, first and last step, last wall_time."""
    from pyspark.sql import functions as F

    df = steps(spark, root)
    return df.groupBy("filename", "rec_dir", "run_dir", "rank").agg(
        F.count(F.lit(1)).alias("rows"),
        F.min("step").alias("first_step"),
        F.max("step").alias("last_step"),
        F.max("wall_time").alias("last_step_at"),
    ).withColumn("compacted", F.col("filename").endswith("/steps.parquet")).select("filename", "rec_dir", "run_dir", "rank", "rows", "first_step", "last_step", "last_step_at", "compacted")


def samples(spark: Any, root: str) -> Any:
    """src_samples: captured samples of every shard below root, rank folders included."""
    from pyspark.sql import functions as F

    tail = {"rank": "BIGINT", "rec_dir": "VARCHAR", "run_dir": "VARCHAR", "filename": "VARCHAR"}
    df = _read(spark, root, "shard-*.parquet", lambda r, p: r.parquet(p, mergeSchema=True))
    if df is None:
        types = {k: v for k, v in SAMPLE_COLUMN_TYPES.items() if k != "rank"}
        return spark.createDataFrame([], options_schema({**types, **tail}))
    df = _path_columns(df).where(F.col("filename").rlike(r"/samples/shard-[^/]*\.parquet$"))
    # one copy per shard, the newest, as in sql/v1/sources/30_src_samples.sql (rlprobe.layout)
    files = df.select(
        "filename", "rec_dir",
        F.regexp_extract("filename", r"/shard-([0-9]+)[^/]*$", 1).alias("shard"),
        F.coalesce(
            F.expr(r"TRY_CAST(regexp_extract(filename, '/shard-[0-9]+\\.open-([0-9]+)\\.parquet$', 1) AS BIGINT)"),
            F.lit(SEALED),
        ).alias("version"),
    ).distinct()
    newest = files.groupBy("rec_dir", "shard").agg(F.max("version").alias("version"))
    keep = files.join(newest, ["rec_dir", "shard", "version"]).select("filename")
    df = df.join(keep, "filename")
    rank = F.coalesce(F.col("rank").cast("bigint"), F.col("file_rank")) if "rank" in df.columns else F.col("file_rank")
    return df.select(*_typed(df, SAMPLE_COLUMN_TYPES, leave_out=("rank",)), rank.alias("rank"), "rec_dir", "run_dir", "filename")


def events(spark: Any, root: str) -> Any:
    """src_events: every events.jsonl line below root that parses and has a kind."""
    from pyspark.sql import functions as F

    df = _read(spark, root, "events.jsonl", lambda r, p: r.schema(options_schema(EVENT_COLUMN_TYPES)).json(p))
    if df is None:
        types = {**EVENT_COLUMN_TYPES, "rec_dir": "VARCHAR", "run_dir": "VARCHAR", "filename": "VARCHAR"}
        return spark.createDataFrame([], options_schema(types))
    df = _path_columns(df).where(F.col("kind").isNotNull())
    return df.select(
        "timestamp", "kind", "step",
        F.coalesce(F.col("rank"), F.col("file_rank")).alias("rank"),
        F.coalesce(F.col("message"), F.lit("")).alias("message"),
        "data", "rec_dir", "run_dir", "filename",
    )


def manifest(spark: Any, root: str) -> Any:
    """src_manifest: every run's manifest.json, parsed from its text."""
    from pyspark.sql import functions as F

    df = _read(spark, root, "manifest.json", lambda r, p: r.text(p, wholetext=True))
    out = {
        "run_dir": "VARCHAR", "manifest_ok": "BOOLEAN", "schema_version": "BIGINT", "run_id": "VARCHAR",
        "created_at": "VARCHAR", "algorithm": "VARCHAR", "model_name": "VARCHAR", "world_size": "BIGINT",
        "trainer_config": "JSON", "environment": "JSON", "name": "VARCHAR", "tags": "VARCHAR[]",
    }
    if df is None:
        return spark.createDataFrame([], options_schema(out))
    df = _path_columns(df).where(F.col("rec_dir") == F.col("run_dir"))
    doc = F.col("value")
    ok = F.get_json_object(doc, "$").isNotNull()
    version = F.when(ok, F.expr("TRY_CAST(get_json_object(value, '$.schema_version') AS BIGINT)"))
    too_new = F.concat(
        F.lit("recording "), F.col("rec_dir"), F.lit(" uses recording format v"), version.cast("string"),
        F.lit(f" but this rlprobe reads up to v{SCHEMA_VERSION}: {UPGRADE_HINT}"),
    )

    def field(path: str) -> Any:
        return F.when(ok, F.get_json_object(doc, path))

    return df.select(
        F.when(version > SCHEMA_VERSION, F.raise_error(too_new).cast("string")).otherwise(F.col("rec_dir")).alias("run_dir"),
        ok.alias("manifest_ok"),
        version.alias("schema_version"),
        field("$.run_id").alias("run_id"),
        field("$.created_at").alias("created_at"),
        field("$.algorithm").alias("algorithm"),
        field("$.model_name").alias("model_name"),
        F.when(ok, F.expr("TRY_CAST(get_json_object(value, '$.world_size') AS BIGINT)")).alias("world_size"),
        field("$.trainer_config").alias("trainer_config"),
        field("$.environment").alias("environment"),
        field("$.name").alias("name"),
        F.from_json(field("$.tags"), "array<string>").alias("tags"),
    )


_TRACE_TYPES = {
    "run_dir": "string", "trace_file": "string", "seq": "bigint", "t": "double", "trace_run_id": "string",
    "event": "string", "attempt_id": "string", "group_id": "string", "prompt_id": "string",
    "generation_index": "bigint", "version": "bigint", "tokens": "bigint", "reason": "string",
    "replaced_version": "bigint", "new_version": "bigint",
    "calls": "array<struct<attempt_id: string, tokens_so_far: bigint>>", "step": "bigint",
    "tokens_by_version": "array<struct<version: bigint, tokens: bigint>>", "trained_version": "bigint",
    "path": "string", "data": "string",
}
# the line's keys, read by json_tuple in one pass over the line
_TRACE_KEYS = (
    "t", "run_id", "event", "attempt_id", "group_id", "prompt_id", "generation_index", "version", "tokens",
    "reason", "replaced_version", "new_version", "calls", "step", "tokens_by_version", "trained_version", "path",
)


def _whole(text: str) -> str:
    """v1.trace_int in Spark SQL: the BIGINT the text spells if it is a whole number, else NULL."""
    number = f"try_cast({text} AS DOUBLE)"
    # bround, not floor: Spark's floor returns a BIGINT, which overflows (an error under ANSI)
    # past 2^63; the text itself is cast first so that a count beyond 2^53 stays exact
    return (f"CASE WHEN {number} = bround({number}) "
            f"THEN coalesce(try_cast({text} AS BIGINT), try_cast({number} AS BIGINT)) END")


def _json_type_is(key: str, first: str) -> str:
    """Whether the line's value at key is a JSON string ('"'), list ('[') or object ('{').

    get_json_object and json_tuple give a string value without its quotes, so the text alone
    cannot tell the string "[1]" from the list [1]; below an array wildcard, get_json_object
    writes values as JSON, quotes included.
    """
    return f"startswith(get_json_object(concat('[', line, ']'), '$[*].{key}'), '{first}')"


# A line that is one JSON value and nothing after it: get_json_object alone stops at the end of
# the first value and ignores what follows. As the only element of '[...]' the line may only be
# followed by ']', which '{"o": ...}' refuses, so together they leave room for nothing.
_ONE_JSON_VALUE = (
    "json_array_length(concat('[', line, ']')) = 1 "
    "AND get_json_object(concat('{\"o\": ', line, '}'), '$.o') IS NOT NULL"
)

# refit calls: [[attempt_id, tokens_so_far], ...]. Usually every element is a list and one
# from_json reads them all; otherwise (NULL) each element is looked at on its own, and one that
# is not a list (a string "[...]" included) counts as no call, as in DuckDB.
_CALL_PAIRS = """coalesce(
    from_json(calls, 'array<array<string>>'),
    transform(from_json(calls, 'array<string>'), (c, i) ->
        CASE WHEN startswith(get_json_object(concat('[', calls, ']'), concat('$[*][', i, ']')), '[')
             THEN from_json(c, 'array<string>') END))"""
_CALLS = f"""CASE WHEN {_json_type_is('calls', '[')} THEN filter(
    transform({_CALL_PAIRS}, p -> named_struct(
        'attempt_id', try_element_at(p, 1), 'tokens_so_far', {_whole('try_element_at(p, 2)')})),
    c -> c.attempt_id IS NOT NULL AND c.tokens_so_far IS NOT NULL) END"""
_TOKENS_BY_VERSION = f"""CASE WHEN {_json_type_is('tokens_by_version', '{')} THEN filter(
    transform(map_entries(from_json(tokens_by_version, 'map<string,string>')), e -> named_struct(
        'version', {_whole('e.key')}, 'tokens', {_whole('e.value')})),
    e -> e.version IS NOT NULL AND e.tokens IS NOT NULL) END"""


def rollout_trace(spark: Any, root: str) -> Any:
    """src_rollout_trace: every rollout_trace.jsonl line below root that is a JSON object with a string event."""
    from pyspark.sql import functions as F

    df = _read(spark, root, "rollout_trace.jsonl", lambda r, p: r.text(p, wholetext=True))
    if df is None:
        return spark.createDataFrame([], ", ".join(f"{_q(n)} {t}" for n, t in _TRACE_TYPES.items()))
    df = _path_columns(df)
    folder = F.regexp_extract("filename", r"^(.*)/rollout_trace\.jsonl$", 1)
    # each file is one row, split here, so a line's position is its exact line number (seq, the
    # order batch_age follows), which Spark's line reader would not keep; limit -1 keeps empty lines
    lines = df.select(
        F.regexp_replace(folder, r"/rank-[0-9]+$", "").alias("run_dir"),
        F.col("filename").alias("trace_file"),
        F.posexplode(F.split("value", "\n", -1)).alias("pos", "line"),
    ).select(
        "run_dir", "trace_file", (F.col("pos") + 1).cast("bigint").alias("seq"),
        F.regexp_replace("line", "\r+$", "").alias("line"),
    ).where(F.expr(f"{_ONE_JSON_VALUE} AND {_json_type_is('event', chr(34))}"))
    fields = lines.select("*", F.json_tuple("line", *_TRACE_KEYS).alias(*_TRACE_KEYS))
    return fields.selectExpr(
        "run_dir", "trace_file", "seq",
        "try_cast(t AS DOUBLE) AS t",
        "run_id AS trace_run_id",
        "event",
        "attempt_id", "group_id", "prompt_id",
        f"{_whole('generation_index')} AS generation_index",
        f"{_whole('version')} AS version",
        f"{_whole('tokens')} AS tokens",
        "reason",
        f"{_whole('replaced_version')} AS replaced_version",
        f"{_whole('new_version')} AS new_version",
        f"{_CALLS} AS calls",
        f"{_whole('step')} AS step",
        f"{_TOKENS_BY_VERSION} AS tokens_by_version",
        f"{_whole('trained_version')} AS trained_version",
        "path",
        "line AS data",
    )


BUILDERS = {
    "src_steps": steps, "src_step_files": step_files, "src_samples": samples, "src_events": events, "src_manifest": manifest,
    "src_rollout_trace": rollout_trace,
}
