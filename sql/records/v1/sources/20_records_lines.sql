-- name: records_lines
-- kind: source
-- depends: records_files
-- doc: One row per line of every records-<attempt>.jsonl. complete is false for a final line
-- doc: with no newline after it (a writer stopped mid-line); ok is true only for a complete
-- doc: line holding one JSON object, the only lines the other queries read. Blank lines are
-- doc: left out. A file that is not UTF-8 gives no lines and counts as unreadable.
-- columns: path VARCHAR, relpath VARCHAR, run_dir VARCHAR, attempt VARCHAR, lineage_dir VARCHAR,
-- columns: line_no BIGINT, line VARCHAR, complete BOOLEAN, ok BOOLEAN, obj JSON

CREATE OR REPLACE TABLE records_lines AS
WITH texts AS (
    SELECT path, relpath, run_dir, attempt, lineage_dir, try(decode(content)) AS text
    FROM records_files
    WHERE file_kind = 'records'
),
split AS (
    SELECT path, relpath, run_dir, attempt, lineage_dir, string_split(text, chr(10)) AS parts
    FROM texts
    WHERE text IS NOT NULL
),
lines AS (
    SELECT
        path, relpath, run_dir, attempt, lineage_dir,
        unnest(parts) AS line,
        generate_subscripts(parts, 1) AS line_no,
        len(parts) AS n_parts
    FROM split
),
flagged AS (
    -- JSON strings cannot hold a raw newline, so every part but the last was ended by one.
    -- TRY_CAST, not a cast guarded by CASE or AND: DuckDB evaluates both sides for a whole vector.
    SELECT *, line_no < n_parts AS complete, TRY_CAST(line AS JSON) AS doc FROM lines WHERE trim(line) <> ''
),
checked AS (
    SELECT *, complete AND coalesce(json_type(doc) = 'OBJECT', false) AS ok FROM flagged
)
SELECT
    path, relpath, run_dir, attempt, lineage_dir, line_no, line, complete, ok,
    CASE WHEN ok THEN doc END AS obj
FROM checked;
