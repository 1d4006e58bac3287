"""Wide recordings (thousands of extra.* metrics) diagnose and report as the same run without them.

A 30-step run with 10,000 metric names took 15.5 s to diagnose and 21.9 s to report, or died
in DuckDB: the doctor copied every column of the run, and the report unpivoted every column
to chart a dozen. The doctor now copies the columns its detectors read (rlprobe.doctor.session.
step_columns) and the report reads the columns it charts, naming the rest from the files'
footers. The findings and the report are those of the same run without the extra columns.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import make_run
from rlprobe.doctor import diagnose, session
from rlprobe.report.data import gather
from rlprobe.synth import write_run

N_EXTRA = 2000


def widen(plain: Path, wide: Path, n_extra: int = N_EXTRA) -> list[str]:
    """A copy of a closed recording whose steps carry n_extra more extra.* columns; their names."""
    shutil.copytree(plain, wide)
    steps = pq.read_table(wide / "steps.parquet")
    rng = np.random.default_rng(0)
    names = [f"extra.layer{i:05d}.grad_norm" for i in range(n_extra)]
    wider = pa.Table.from_arrays(
        [*steps.columns, *(pa.array(rng.random(steps.num_rows)) for _ in names)],
        names=[*steps.column_names, *names],
    )
    pq.write_table(wider, wide / "steps.parquet")
    return names


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[Path, Path, list[str]]:
    root = tmp_path_factory.mktemp("wide-doctor")
    write_run(root / "plain", "ENTROPY_COLLAPSE", n_steps=300, seed=3)
    return root / "plain", root / "wide", widen(root / "plain", root / "wide")


@pytest.mark.slow
def test_a_wide_run_has_the_findings_of_the_run_without_its_extras(runs):
    plain, wide, _ = runs
    found = diagnose(plain)
    assert found, "the synthetic run has a finding to compare"
    assert [f.model_dump() for f in diagnose(wide)] == [f.model_dump() for f in found]


@pytest.mark.slow
def test_a_wide_run_reports_as_the_run_without_its_extras(runs):
    plain, wide, names = runs
    a, b = gather(plain), gather(wide)
    assert b.charts == a.charts and b.findings == a.findings and b.skipped == a.skipped
    assert b.samples == a.samples and b.events == a.events
    # the extras are listed as logged, not drawn, as they were when every column was read
    assert b.other_metrics == sorted(a.other_metrics + names)


def test_the_doctor_copies_the_columns_it_reads_not_the_extras():
    pattern = session.step_columns()
    con = session.new_connection()

    def copied(name: str) -> bool:
        return con.sql("SELECT regexp_matches(?, ?)", params=[name, pattern]).fetchall()[0][0]

    assert copied("entropy_mean") and copied("kl_positional") and copied("reward_component.format")
    assert not copied("extra.layer00007.grad_norm")
    # what a custom detector names is copied too; one that may read any column gets them all
    assert session.step_columns(['SELECT max("extra.gpu_mem_gb") FROM steps WHERE run_id = ?']) is not None
    assert session.step_columns(["SELECT * FROM steps WHERE run_id = ?"]) is None


def test_a_custom_detector_reads_the_extra_metric_it_names(tmp_path):
    run = tmp_path / "run"
    make_run(run, 20, extra=("gpu_mem_gb", "tokens_per_s"))
    folder = tmp_path / "detectors"
    folder.mkdir()
    (folder / "gpu.sql").write_text(
        "-- id: GPU_MEM_SEEN\n-- severity: info\n-- explanation: The GPU memory was logged.\n"
        'SELECT min(step) AS first_step, count("extra.gpu_mem_gb") AS n FROM steps WHERE run_id = ? HAVING n > 0\n'
    )
    (folder / "star.sql").write_text(
        "-- id: ANY_COLUMN\n-- severity: info\n-- explanation: Every column was there.\n"
        'SELECT min(step) AS first_step, count(*) AS n FROM (SELECT * FROM steps WHERE run_id = ?) '
        'WHERE "extra.tokens_per_s" IS NOT NULL HAVING n > 0\n'
    )
    (tmp_path / "doctor.toml").write_text('[doctor]\ncustom_detectors = "detectors"\n')
    found = {f.signature_id: f for f in diagnose(run, config_path=tmp_path / "doctor.toml")}
    assert found["GPU_MEM_SEEN"].evidence == {"n": 20} and found["ANY_COLUMN"].evidence == {"n": 20}


def test_a_run_of_extra_metrics_alone_charts_them(tmp_path):
    run = tmp_path / "custom"
    make_run(run, 30, columns=(), components=(), extra=("tokens_per_s", "gpu_mem_gb"))
    data = gather(run)
    assert [c["title"] for c in data.charts] == ["extra.gpu_mem_gb", "extra.tokens_per_s"]
    assert all(len(c["x"]) == 30 for c in data.charts) and data.other_metrics == []


@pytest.mark.slow
def test_ten_thousand_metrics_diagnose_and_report_from_the_cli(runs, tmp_path):
    """With every column copied, DuckDB died (SIGFPE) on a run this wide: a process, not a test."""
    plain, _, _ = runs
    wide = tmp_path / "plain"  # the same folder name: the doctor's JSON names the run by it
    widen(plain, wide, 10_000)

    def rlprobe(*args: str) -> subprocess.CompletedProcess:
        proc = subprocess.run([sys.executable, "-m", "rlprobe", *args], capture_output=True, text=True, timeout=300)
        assert proc.returncode in (0, 1), f"rlprobe {args[0]} exited {proc.returncode}: {proc.stderr[-300:]}"
        return proc

    def findings(run: Path) -> list[dict]:
        return json.loads(rlprobe("doctor", str(run), "--json").stdout)["findings"]

    assert findings(wide) == findings(plain)
    rlprobe("report", str(wide), "--out", str(tmp_path / "wide.html"))
    assert "extra.layer09999.grad_norm" in (tmp_path / "wide.html").read_text(encoding="utf-8")
