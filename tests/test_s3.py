"""Runs roots in object storage: ls, query, sql and doctor on s3:// URLs, read through fsspec.

A local S3 server (moto's server mode, on 127.0.0.1) is started once for the module; a root
built locally is uploaded to it, and every command's output over the bucket is compared with the
same command over the local copy. Skipped when moto, boto3 or s3fs are missing (the `s3` extra;
.ci/run installs them).
"""

from __future__ import annotations

import csv
import io
import json
import logging
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import duckdb
import pytest
from click.testing import CliRunner, Result

from rlprobe.cli import cli
from rlprobe.store import RunReader, init_script, open_store, resolve
from rlprobe.synth import write_run

from conftest import make_run

BUCKET = "rlprobe-test"


def invoke(*args: str) -> Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, Any]]:
    """A moto S3 server with the env a user sets for a private endpoint, and a root uploaded to it."""
    pytest.importorskip("s3fs")
    pytest.importorskip("boto3")
    moto_server = pytest.importorskip("moto.server")
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    import tempfile

    with pytest.MonkeyPatch.context() as mp, tempfile.TemporaryDirectory(prefix="rlprobe-s3-") as tmp:
        for key, value in {
            "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_ENDPOINT_URL": f"http://{host}:{port}", "AWS_EC2_METADATA_DISABLED": "true",
        }.items():
            mp.setenv(key, value)
        for key in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3"):
            mp.delenv(key, raising=False)
        import boto3
        import s3fs

        boto3.client("s3").create_bucket(Bucket=BUCKET)
        local = Path(tmp) / "root"
        write_run(local / "collapse", "ENTROPY_COLLAPSE", n_steps=200, seed=1)
        write_run(local / "sweep" / "lr[1e-5]", "HEALTHY", n_steps=200, seed=2)  # glob characters in a name
        make_run(local / "sweep" / "live", 9, state="live", samples_per_step=2)  # part files only
        s3fs.S3FileSystem(skip_instance_cache=True).put(str(local) + "/", f"{BUCKET}/root/", recursive=True)
        try:
            yield {"url": f"s3://{BUCKET}/root", "local": local, "endpoint": f"http://{host}:{port}"}
        finally:
            server.stop()


def test_resolve_tells_run_from_root(s3: dict[str, Any]) -> None:
    root = resolve(s3["url"] + "/")
    assert (root.kind, str(root.path)) == ("root", s3["url"])
    run = resolve(s3["url"] + "/collapse")
    assert (run.kind, str(run.path), run.path.name) == ("run", s3["url"] + "/collapse", "collapse")
    live = resolve(s3["url"] + "/sweep/live")  # no steps.parquet yet: steps/ and the manifest say run
    assert live.kind == "run"
    assert resolve(s3["url"] + "/collapse/manifest.json").path == s3["url"] + "/collapse"


def test_ls_lists_the_same_runs_as_the_local_copy(s3: dict[str, Any]) -> None:
    remote = invoke("ls", s3["url"], "--csv")
    local = invoke("ls", s3["local"], "--csv")
    assert remote.exit_code == 0, remote.output
    strip = lambda rows: sorted((r["run_id"], r["status"], r["steps"], r["last_step"], r["run_dir"].rsplit("root/", 1)[1]) for r in rows)  # noqa: E731
    assert strip(csv_rows(remote.stdout)) == strip(csv_rows(local.stdout))
    assert {r["status"] for r in csv_rows(remote.stdout)} == {"closed", "live"}
    assert all(r["run_dir"].startswith(s3["url"] + "/") for r in csv_rows(remote.stdout))
    table = invoke("ls", s3["url"])
    assert "sweep/lr[1e-5]" in table.stdout and "collapse" in table.stdout


def test_query_csv_over_root_and_single_run_matches_local(s3: dict[str, Any]) -> None:
    sql = ("SELECT run_id, count(*) AS n, min(step) AS lo, max(step) AS hi, sum(entropy_mean) AS h "
           "FROM steps GROUP BY run_id ORDER BY run_id")
    remote = invoke("query", s3["url"], sql, "--csv")
    assert remote.exit_code == 0, remote.output
    assert remote.stdout == invoke("query", s3["local"], sql, "--csv").stdout
    assert len(csv_rows(remote.stdout)) == 3
    counts = ("SELECT (SELECT count(*) FROM steps) AS steps, (SELECT count(*) FROM samples) AS samples, "
              "(SELECT count(*) FROM events) AS events")
    for run in ("collapse", "sweep/lr[1e-5]", "sweep/live"):  # single-run mode: '**' matches no folder
        remote_run = invoke("query", f"{s3['url']}/{run}", counts, "--csv")
        assert remote_run.exit_code == 0, remote_run.output
        assert remote_run.stdout == invoke("query", s3["local"] / run, counts, "--csv").stdout
        assert int(csv_rows(remote_run.stdout)[0]["steps"]) > 0


def test_a_run_id_filter_on_a_bucket_lists_only_that_runs_folder(s3: dict[str, Any]) -> None:
    store = open_store(s3["url"])
    run_id = store.rows("SELECT run_id FROM manifest WHERE run_dir LIKE '%/lr[1e-5]'")[2][0][0]
    sql = f"SELECT count(*), max(step), sum(entropy_mean) FROM steps WHERE run_id = '{run_id}'"
    assert store.scope_for(sql) == [s3["url"] + "/sweep/lr[1e-5]"]
    assert store.rows(sql)[2] == open_store(s3["url"]).con.sql(sql).fetchall()  # the unscoped answer
    assert store.rows(sql)[2][0][0] == 200


def test_reader_and_connection_work_on_a_url(s3: dict[str, Any]) -> None:
    reader = RunReader(s3["url"] + "/collapse")
    assert reader.run_dir.name == "collapse"
    assert len(reader.steps()) == 200
    assert reader.manifest is not None and reader.manifest.algorithm
    store = open_store(s3["url"])
    assert store.rows("SELECT count(DISTINCT run_id) FROM samples")[2] == [(3,)]


def test_sql_script_binds_the_url_and_runs_where_the_filesystem_is_registered(s3: dict[str, Any]) -> None:
    import s3fs

    result = invoke("sql", s3["url"])
    assert result.exit_code == 0, result.output
    assert f"SET VARIABLE rlprobe_root = '{s3['url']}';" in result.stdout
    assert result.stdout == init_script(resolve(s3["url"]))
    con = duckdb.connect()
    con.register_filesystem(s3fs.S3FileSystem(skip_instance_cache=True))  # what docs/storage.md tells users
    con.execute(result.stdout)
    expected = open_store(s3["local"]).rows("SELECT run_id, steps_recorded, status FROM runs ORDER BY run_id")[2]
    assert con.sql("SELECT run_id, steps_recorded, status FROM runs ORDER BY run_id").fetchall() == expected


def test_doctor_on_a_bucket_finds_what_it_finds_locally(s3: dict[str, Any]) -> None:
    remote = invoke("doctor", s3["url"], "--json")
    local = invoke("doctor", s3["local"], "--json")
    assert remote.exit_code == local.exit_code == 1  # the collapse is critical
    summary = lambda out: sorted((d["run_id"], sorted((f["signature_id"], f["first_step"]) for f in d["findings"])) for d in json.loads(out))  # noqa: E731
    assert summary(remote.stdout) == summary(local.stdout)
    assert any(sig == "ENTROPY_COLLAPSE" for _, fs in summary(remote.stdout) for sig, _ in fs)
    one = invoke("doctor", s3["url"] + "/sweep/lr[1e-5]")
    assert one.exit_code == 0, one.output
    assert f"({s3['url']}/sweep/lr[1e-5])" in one.stdout


@pytest.mark.parametrize("suffix, needle", [
    ("/no-such-prefix", "no such bucket, prefix or object"),
    ("/collapse/synth_truth.json", "is a file, not a recording"),
])
def test_missing_prefix_or_a_stray_file_is_one_line(s3: dict[str, Any], suffix: str, needle: str) -> None:
    for command in (["ls"], ["query", "SELECT 1"], ["doctor"], ["sql"]):
        args = [command[0], s3["url"] + suffix, *command[1:]]
        result = invoke(*args)
        assert result.exit_code == 2, (args, result.output)
        assert result.stderr.strip().count("\n") == 0 and needle in result.stderr, result.stderr
        assert "Traceback" not in result.output


def test_missing_bucket_and_bad_credentials_are_one_line_in_a_real_process(s3: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    proc = subprocess.run([sys.executable, "-m", "rlprobe", "ls", "s3://no-such-bucket-rlprobe/runs"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == "rlprobe: s3://no-such-bucket-rlprobe/runs: no such bucket, prefix or object"

    import moto.settings

    # the in-process server now checks keys, and knows none: every request is refused with 403
    monkeypatch.setattr(moto.settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)
    result = invoke("query", s3["url"], "SELECT count(*) FROM steps")
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "access denied" in lines[0] and "AWS_ACCESS_KEY_ID" in lines[0], result.stderr


def test_a_store_opened_before_credentials_fail_reports_one_line(s3: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    from rlprobe.errors import QueryError
    import moto.settings

    store = open_store(s3["url"])
    monkeypatch.setattr(moto.settings, "INITIAL_NO_AUTH_ACTION_COUNT", 0)
    with pytest.raises(QueryError) as info:
        store.rows("SELECT count(*) FROM steps")
    message = str(info.value)
    assert "\n" not in message and "PermissionError" in message and "Traceback" not in message


def test_other_fsspec_urls_work_too(tmp_path: Path) -> None:
    fsspec = pytest.importorskip("fsspec")
    write_run(tmp_path / "r" / "a", "HEALTHY", n_steps=30, seed=3)
    fs = fsspec.filesystem("memory")
    fs.put(str(tmp_path / "r") + "/", "/rlprobe-test-root/", recursive=True)
    try:
        result = invoke("query", "memory://rlprobe-test-root", "SELECT count(*) AS n FROM steps", "--csv")
        assert result.exit_code == 0, result.output
        assert csv_rows(result.stdout) == [{"n": "30"}]
    finally:
        fs.rm("/rlprobe-test-root", recursive=True)


def test_local_use_never_imports_fsspec(finished_run: Path) -> None:
    code = ("import sys, rlprobe; rlprobe.connect(sys.argv[1]).sql('SELECT count(*) FROM steps').fetchall(); "
            "print(sorted(m for m in ('fsspec', 's3fs', 'botocore') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(finished_run)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
