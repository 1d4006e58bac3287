-- name: event_columns
-- kind: source
-- depends: (none)
-- doc: Every Event column with its type and no rows, unioned under the events files so that a
-- doc: root with no events.jsonl yet still has an events view with the right columns.
-- columns: timestamp, kind, step, rank, message, data, filename

CREATE OR REPLACE VIEW v1.event_columns AS
SELECT
    CAST(NULL AS DOUBLE) AS timestamp,
    CAST(NULL AS VARCHAR) AS kind,
    CAST(NULL AS BIGINT) AS step,
    CAST(NULL AS BIGINT) AS rank,
    CAST(NULL AS VARCHAR) AS message,
    CAST(NULL AS JSON) AS data,
    CAST(NULL AS VARCHAR) AS filename,
    -- see step_columns: the column allow_empty returns when no file matches
    CAST(NULL AS BOOLEAN) AS "empty"
WHERE false;
