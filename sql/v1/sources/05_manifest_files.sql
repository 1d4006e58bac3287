-- name: manifest_files
-- kind: source
-- depends: paths
-- doc: The raw text of every manifest.json below the root, rank sub-recordings' included (rank
-- doc: is the folder's: 0 for the run's own), whether it parses, and the recording format version
-- doc: it declares: schema_version when it is a JSON integer, version_text as written otherwise
-- doc: (a string, a fraction: a version no reader can take for v1). Nothing here refuses a
-- doc: newer version: this is what the version check itself reads.
-- columns: run_dir VARCHAR, rec_dir VARCHAR, rank BIGINT, ok BOOLEAN, schema_version BIGINT,
-- columns: version_text VARCHAR, content VARCHAR

CREATE OR REPLACE VIEW v1.manifest_files AS
WITH raw AS (
    SELECT v1.rec_dir(filename) AS rec_dir, content, json_valid(content) AS ok
    FROM read_text(v1.globs('manifest.json'))
)
SELECT
    v1.run_dir(rec_dir) AS run_dir,
    rec_dir,
    v1.rank_of(rec_dir) AS rank,
    ok,
    CASE WHEN ok AND json_type(content, '$.schema_version') IN ('UBIGINT', 'BIGINT')
         THEN TRY_CAST(json_extract(content, '$.schema_version') AS BIGINT) END AS schema_version,
    CASE WHEN ok THEN json_extract(content, '$.schema_version')::VARCHAR END AS version_text,
    content
FROM raw;
