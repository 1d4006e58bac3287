"""The Spark side of sql/v1/sources: the same four source views, read with spark.read.

Each mirrors its DuckDB file (columns, order and rules), because the transpiled views rely on
exactly those:

- src_steps: every steps/part-*.parquet and steps.parquet below the root, schemas merged by
  name (mergeSchema), every fixed StepRecord column present with its type (NULL where nobody
  logged it). A recording that has steps.parquet ignores its parts, decided per file.
- src_samples: every samples/shard-*.parquet, rank filled from the rank-NNN folder when absent.
- src_events: every events.jsonl line that parses and has a kind; data stays JSON text.
- src_manifest: every run's manifest.json (rank folders excluded), parsed from its text so one
  broken manifest cannot hide the others; a newer recording format fails every query over it.

Files are found by Spark itself (recursiveFileLookup + pathGlobFilter), so a root can be any
path Spark reads (hdfs://, s3a://, ...). Spark skips files whose names start with '.' or '_',
which keeps the recorder's hidden temp files out, as DuckDB's globs do.
"""

from __future__ import annotations

from typing import Any, Callable

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
}
_REC_DIR = (
    r"^(.*)/(manifest\.json|steps\.parquet|steps/part-[^/]*\.parquet|samples/shard-[^/]*\.parquet|events\.jsonl)$"
)


# columns the builders add for their own use, never passed on as metric columns
_HELPERS = {"filename", "rec_dir", "run_dir", "file_rank", "rank", "compacted"}


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
    df = _path_columns(df).where(F.col("filename").rlike(r"/steps/part-[^/]*\.parquet$|/steps\.parquet$"))
    # which copy wins is decided per file, as in sql/v1/sources/30_src_steps.sql
    files = (
        df.select("filename", "rec_dir").distinct()
        .groupBy("rec_dir")
        .agg(F.max(F.col("filename").endswith("/steps.parquet").cast("int")).alias("compacted"))
    )
    df = df.join(files, "rec_dir").where((F.col("compacted") == 0) | ~F.col("filename").contains("/steps/part-"))
    return df.select(*_typed(df, STEP_COLUMN_TYPES), "rec_dir", "run_dir", F.col("file_rank").alias("rank"), "filename")


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
        "trainer_config": "JSON", "environment": "JSON",
    }
    if df is None:
        return spark.createDataFrame([], options_schema(out))
    df = _path_columns(df).where(F.col("rec_dir") == F.col("run_dir"))
    doc = F.col("value")
    ok = F.get_json_object(doc, "$").isNotNull()
    version = F.when(ok, F.expr("TRY_CAST(get_json_object(value, '$.schema_version') AS BIGINT)"))
    too_new = F.concat(
        F.lit("recording "), F.col("rec_dir"), F.lit(" uses recording format v"), version.cast("string"),
        F.lit(f" but this rlprobe reads up to v{SCHEMA_VERSION}: upgrade rlprobe (pip install -U rlprobe)"),
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
    )


BUILDERS = {
    "src_steps": steps, "src_step_files": step_files, "src_samples": samples, "src_events": events, "src_manifest": manifest,
}
