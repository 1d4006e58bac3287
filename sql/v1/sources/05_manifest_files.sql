-- name: manifest_files
-- kind: source
-- depends: paths
-- doc: The raw text of every run's manifest.json (rank sub-recordings excluded), whether it
-- doc: parses, and the recording format version it declares. Nothing here refuses a newer
-- doc: version: this is what the version check itself reads.
-- columns: run_dir VARCHAR, ok BOOLEAN, schema_version BIGINT, content VARCHAR

CREATE OR REPLACE VIEW v1.manifest_files AS
WITH raw AS (
    SELECT v1.rec_dir(filename) AS rec_dir, content, json_valid(content) AS ok
    FROM read_text(v1.globs('manifest.json'))
)
SELECT
    rec_dir AS run_dir,
    ok,
    CASE WHEN ok THEN TRY_CAST(json_extract(content, '$.schema_version') AS BIGINT) END AS schema_version,
    content
FROM raw
WHERE rec_dir = v1.run_dir(rec_dir);
