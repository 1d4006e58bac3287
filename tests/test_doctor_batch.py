"""A detector's statement about its run, asked once for a chunk of a root (rlprobe.doctor.batch):
each run gets exactly the rows it gets asked alone."""

from __future__ import annotations

import pytest

from rlprobe.doctor import engine, session
from rlprobe.doctor.batch import chunk_form
from rlprobe.store.engine import open_store, run


@pytest.mark.parametrize("sql, taken", [
    ("SELECT count(*) AS n FROM v1.samples WHERE run_id = ?", True),
    ("SELECT step, noise_ratio FROM v1.feat_reward_noise WHERE run_id = ? AND metric = ? ORDER BY step", True),
    ("SELECT x, count(*) AS n FROM v1.steps WHERE run_id = ? GROUP BY x ORDER BY n DESC", True),
    ("SELECT a, b FROM v1.feat_opt_offpolicy WHERE run_id = ?", True),
    # a limit, a window, a join, DISTINCT or HAVING would act across the runs of the chunk
    ("SELECT sample_id FROM v1.samples WHERE run_id = ? ORDER BY step LIMIT 5", False),
    ("SELECT step, lag(x) OVER (ORDER BY step) AS prev FROM v1.steps WHERE run_id = ?", False),
    ("SELECT s.step FROM v1.steps AS s JOIN v1.doctor_bin_width AS z USING (run_id) WHERE run_id = ?", True),
    ("SELECT s.step FROM v1.steps AS s LEFT JOIN v1.samples AS x USING (run_id, step) WHERE run_id = ?", True),
    ("SELECT s.step FROM v1.steps AS s JOIN v1.doctor_bin_width AS z ON z.run_id = s.run_id WHERE s.run_id = ?", False),
    ("SELECT s.step FROM v1.steps AS s CROSS JOIN v1.doctor_metric_floors AS f WHERE run_id = ?", False),
    ("SELECT s.step FROM v1.steps AS s JOIN v1.samples AS x USING (step) WHERE run_id = ?", False),
    ("SELECT DISTINCT step FROM v1.steps WHERE run_id = ?", False),
    ("SELECT x, count(*) AS n FROM v1.steps WHERE run_id = ? GROUP BY x HAVING count(*) > 1", False),
    # the run's conjunct must be at the top of WHERE, unqualified, and its parameter the first
    ("SELECT step FROM v1.steps WHERE run_id = ? OR step > 3", False),
    ("SELECT step FROM v1.steps AS s WHERE s.run_id = ?", False),
    ("SELECT step - ? AS k FROM v1.steps WHERE run_id = ?", False),
    ("SELECT step FROM v1.steps WHERE step IN (SELECT step FROM v1.samples WHERE run_id = ?)", False),
    ("SELECT 'ORDER BY' AS o, step FROM v1.steps WHERE run_id = ?", False),
    ("SELECT step FROM v1.steps WHERE run_id = ? -- the run's steps", False),
    ("SELECT count(*) FROM v1.steps WHERE run_id = ? AND step > 3 GROUP BY ALL", False),
    # a column by its place: the run put in front would shift it
    ("SELECT x, count(*) AS n FROM v1.steps WHERE run_id = ? GROUP BY 1", False),
    ("SELECT step, x FROM v1.steps WHERE run_id = ? ORDER BY 2 DESC", False),
    ("SELECT step, x FROM v1.steps WHERE run_id = ? ORDER BY ALL", False),
])
def test_chunk_form_takes_only_the_statements_it_answers_exactly(sql, taken):
    assert (chunk_form(sql) is not None) == taken


def test_the_chunk_form_keeps_the_text_and_puts_the_run_first():
    form = chunk_form("SELECT count(*) AS n FROM v1.steps WHERE run_id = ? AND kl_positional IS NOT NULL")
    assert form.sql == ("SELECT run_id AS rlprobe_batch_run, count(*) AS n FROM v1.steps WHERE true AND kl_positional "
                        "IS NOT NULL GROUP BY run_id ORDER BY rlprobe_batch_run")
    assert form.empty == "SELECT count(*) AS n FROM v1.steps WHERE false AND kl_positional IS NOT NULL"


STATEMENTS = [
    # an aggregate: the run without samples gets the count of nothing
    ("SELECT count(*) AS n FROM v1.samples WHERE run_id = ?", []),
    ("SELECT min(step) AS lo, max(step) AS hi, avg(reward_mean) AS r FROM v1.steps WHERE run_id = ?", []),
    ("SELECT count(*) AS n FROM v1.steps WHERE run_id = ? AND kl_positional IS NOT NULL AND len(kl_positional) >= 2", []),
    # rows in order, with a parameter besides the run (asked for the chunk from the second run on)
    ("SELECT step, noise_ratio FROM v1.feat_reward_noise WHERE run_id = ? AND metric = ? ORDER BY step", ["reward_mean"]),
    ("SELECT step, nan_count, loss_nonfinite FROM v1.feat_opt_nonfinite WHERE run_id = ? ORDER BY step", []),
    ("SELECT step % 7 AS k, count(*) AS n, max(reward_mean) AS top FROM v1.steps WHERE run_id = ? GROUP BY k ORDER BY k", []),
    ("SELECT step FROM v1.steps WHERE run_id = ? AND step > ? ORDER BY step", [10_000]),  # no rows for any run
    ("SELECT CAST(floor((s.step - z.step_min) / z.width) AS BIGINT) AS bin, avg(reward_mean) AS r FROM v1.steps AS s "
     "JOIN v1.doctor_bin_width AS z USING (run_id) WHERE run_id = ? GROUP BY bin ORDER BY bin", []),
    # text is read per run from its folders; a statement with no chunk form is asked per run
    ("SELECT count(*) AS n FROM v1.feat_gen_text_repetition WHERE run_id = ? AND rep_samples > 0", []),
    ("SELECT count(*) AS n FROM v1.samples WHERE run_id = ? AND completion_text IS NOT NULL", []),
    ("SELECT sample_id FROM v1.samples WHERE run_id = ? ORDER BY step, sample_id LIMIT 3", []),
]


def test_each_run_gets_the_rows_it_gets_alone(tmp_path):
    from rlprobe.synth import write_run

    root = tmp_path / "root"
    write_run(root / "a", "GRAD_PATHOLOGY", n_steps=150, seed=1)
    write_run(root / "b", "healthy", n_steps=120, seed=2, samples_every=0)
    write_run(root / "c", "REF_POLICY_DRIFT_ASYMMETRY", n_steps=140, seed=3, samples_every=3)
    store = open_store(root)
    runs = engine._runs_of(store.con)
    chunked = session.RootSession(store.con, runs, engine.FEATURES_SQL)
    for info in runs:
        chunked.focus(info["run_id"])
        for sql, extra in STATEMENTS:
            params = [info["run_id"], *extra]
            got = chunked.ask(sql, params)
            with chunked.around(sql):
                alone = run(store.con, sql, params)
            assert got.schema == alone.schema and got.equals(alone), (info["run_id"], sql)
            # after each statement, whatever it computed for the chunk, the views hold this run alone
            for view in ("steps", "samples", "doctor_binned", *chunked.cached):
                held = run(store.con, f"SELECT DISTINCT run_id FROM v1.{view}").column("run_id").to_pylist()
                assert set(held) <= {info["run_id"]}, (view, sql)
        columns = chunked.ask("SELECT * FROM v1.steps LIMIT 0", [])
        assert columns.num_rows == 0 and columns.schema == run(store.con, "SELECT * FROM v1.steps LIMIT 0").schema
    asked_for_the_chunk = {sql for (sql, _), answer in chunked.answers.items() if answer is not None}
    assert asked_for_the_chunk == {sql for sql, _ in STATEMENTS[:8]}
