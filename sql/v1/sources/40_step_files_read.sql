-- name: step_files_read
-- kind: source
-- depends: paths
-- doc: Table macros over a given list of step files (paths below the root, not globs: each is
-- doc: escaped here, so '[' or '*' in a folder name is a literal character), for the dashboard's
-- doc: charts (sql/v1/ui/queries/ui_series_files.sql and the ui_step_file_* queries): the files'
-- doc: rows with their filename (only the columns a query names are read), the footers' column
-- doc: chunks (parquet_metadata: row counts, statistics) and the schemas' fields (parquet_schema).
-- doc: The files are the ones the steps view would read for some runs, picked by rlprobe.ui.
-- columns: (macros) v1.step_file_rows(files) -> every column of the files, filename VARCHAR;
-- columns: v1.step_file_chunks(files) -> parquet_metadata's columns; v1.step_file_fields(files)
-- columns: -> parquet_schema's columns

CREATE OR REPLACE MACRO v1.step_file_globs(files) AS list_transform(files::VARCHAR[], lambda p: v1.glob_escape(p));

CREATE OR REPLACE MACRO v1.step_file_rows(files) AS TABLE
SELECT * FROM read_parquet(v1.step_file_globs(files), union_by_name = true, filename = true, hive_partitioning = false);

CREATE OR REPLACE MACRO v1.step_file_chunks(files) AS TABLE
SELECT * FROM parquet_metadata(v1.step_file_globs(files));

CREATE OR REPLACE MACRO v1.step_file_fields(files) AS TABLE
SELECT * FROM parquet_schema(v1.step_file_globs(files));
