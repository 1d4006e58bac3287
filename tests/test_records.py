"""Inference records (spec 004): the writer, `records summarize`, `records select`, the loader and filter.

Stores for the read side are written by hand (manifest and record lines as literal dicts), so
every expected count and statistic below is worked out from the rows in the test itself.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from pathlib import Path
from typing import Any, Iterator, Sequence

import pytest
from click.testing import CliRunner

from rlprobe.cli import cli
from rlprobe.errors import RecordsAmbiguous, SelectionExhausted, SelectionMismatch
from rlprobe.records import (
    RecordsWriter,
    SelectionFilter,
    build_protocol,
    group_from_samples,
    lineage_of,
    load_selection,
    policy_scope,
    prompt_identity,
    protocol_digest,
    validity,
)
from rlprobe.records.select import build_selection, readmit_draw, upper_bound
from rlprobe.records.summary import summarize

LINEAGE = "aaaaaaaaaaaaaaaa"
PROTOCOL = "p" * 64


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


# -- hand-built stores ----------------------------------------------------------------------------

def response(i: int, reward: float | None, *, valid: bool | None = True, scope: str | None = "start_checkpoint",
             tokens: int = 10, truncated: bool = False, versions: Sequence[int] = (0,)) -> dict[str, Any]:
    return {"index": i, "reward": reward, "reward_components": [{"name": "math", "score": reward, "weight": 1.0}],
            "validity": {"valid": valid, "components": {"math": {True: "ok", False: "timeout", None: "unknown"}[valid]}},
            "response_tokens": tokens, "status": "truncated" if truncated else "completed", "truncated": truncated,
            "policy_versions": list(versions), "policy_scope": scope}


def group(obs: str, key: str, responses: list[dict[str, Any]], *, decision: str = "passed", reason: str | None = None,
          verifiers: Sequence[str] = ("math",)) -> dict[str, Any]:
    return {"kind": "group", "observation_id": obs, "task_key": f"task-{key}", "task_key_basis": "rendered_input+targets",
            "input_key": key, "query_sha256": f"query-{key}", "prompt_token_sha256": None, "prepared_sample_id": None,
            "source_dataset": "d", "source_row": 0, "verifiers": list(verifiers), "group_index": 0, "rollout_id": 0,
            "group_size": len(responses), "group_attempt": None, "filter_decision": decision, "filter_reason": reason,
            "responses_included": False, "responses": responses}


def disposition(obs: str, what: str = "consumed", staleness: int = 0) -> dict[str, Any]:
    return {"kind": "disposition", "observation_id": obs, "disposition": what, "staleness": staleness}


def write_attempt(root: Path, run: str, attempt: str, rows: list[dict[str, Any]], *, lineage: str = LINEAGE,
                  manifest: bool = True, torn: str | None = None, protocol: str = PROTOCOL,
                  rollout_seed: int | None = None, deterministic: bool = False) -> Path:
    run_dir = root / lineage / run
    run_dir.mkdir(parents=True, exist_ok=True)
    if manifest:
        (run_dir / f"manifest-{attempt}.json").write_text(json.dumps({
            "source": "train", "run": {"name": run.rsplit("-", 1)[0], "id": run.rsplit("-", 1)[1], "attempt": attempt,
                                       "start_rollout_id": 0, "checkpoint": "/ck", "fresh": True},
            "lineage": lineage, "basis": "workflow-model.json", "weights_hashed": False,
            "protocol": {"sampling": {"temperature": 1.0}}, "protocol_digest": protocol,
            "rollout_seed": rollout_seed, "deterministic_inference": deterministic, "selection_sha256": None}))
    text = "".join(json.dumps(r) + "\n" for r in rows) + (torn or "")
    path = run_dir / f"records-{attempt}.jsonl"
    path.write_text(text)
    return path


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    """Two runs of one lineage. Run A (manifest, torn last line): G1 all zero and filtered, G2 mixed
    and consumed, G3 run_version and never disposed, G4 aborted without responses. Run B (no
    manifest): G5 constant 0.5, never disposed, and a disposition naming no group."""
    root = tmp_path / "store"
    write_attempt(root, "exp-A", "a1", [
        group("g1", "k1", [response(i, 0.0) for i in range(4)], decision="filtered", reason="zero_std_0.0"),
        group("g2", "k1", [response(0, 1.0, tokens=20), response(1, 0.0, tokens=20),
                           response(2, 0.0, valid=False, tokens=20), response(3, 0.0, valid=None, tokens=20)]),
        disposition("g2", "consumed", 1),
        group("g3", "k2", [response(0, 1.0, scope="run_version", tokens=5, versions=[3]),
                           response(1, 1.0, scope="run_version", tokens=7, truncated=True, versions=[3])]),
        group("g4", "k2", [], decision="aborted", verifiers=("math", "code")),
    ], torn='{"kind": "group", "observation_id": "g9", "inpu')
    write_attempt(root, "exp-B", "b1", [
        group("g5", "k1", [response(0, 0.5, tokens=3), response(1, 0.5, tokens=3)]),
        disposition("zzz", "expired", 4),
    ], manifest=False)
    return root


# -- the writer -----------------------------------------------------------------------------------

@pytest.fixture()
def checkpoint(tmp_path: Path) -> Path:
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "config.json").write_text('{"hidden": 8}')
    (ck / "model.safetensors").write_bytes(b"\0" * 64)
    return ck


def new_writer(tmp_path: Path, checkpoint: Path, **kwargs: Any) -> RecordsWriter:
    kwargs.setdefault("protocol", build_protocol({"temperature": 1.0}))
    return RecordsWriter(tmp_path / "records", run_name="exp", checkpoint=checkpoint, **kwargs)


def test_a_full_queue_drops_and_counts_instead_of_blocking(tmp_path: Path, checkpoint: Path) -> None:
    writer = new_writer(tmp_path, checkpoint, queue_size=4)
    release = threading.Event()
    real = writer._write_line
    writer._write_line = lambda line: (release.wait(10), real(line))  # type: ignore[method-assign]
    started = time.perf_counter()
    ids = [writer.record_group(group("", "k", [response(0, 1.0)])) for _ in range(20)]
    elapsed = time.perf_counter() - started
    assert elapsed < 3.0, f"20 calls against a stuck writer took {elapsed:.2f} s"
    c = writer.counters()
    assert c["queued"] + c["dropped"] == 20 and 4 <= c["queued"] <= 5, c  # 4 queued, maybe 1 in the writer's hands
    assert ids.count(None) == c["dropped"]
    release.set()
    final = writer.close(timeout_s=10)
    assert final == {"queued": c["queued"], "written": c["queued"], "dropped": c["dropped"], "failed": 0, "pending": 0}
    assert len(writer.records_path.read_text().splitlines()) == c["queued"]
    assert writer.metrics()["rollout/records/dropped_total"] == c["dropped"]


def test_non_finite_numbers_are_written_as_null(tmp_path: Path, checkpoint: Path) -> None:
    writer = new_writer(tmp_path, checkpoint)
    writer.record_group(group("", "k", [response(0, float("nan")), response(1, float("inf"))]))
    assert writer.close()["written"] == 1
    (row,) = [json.loads(line) for line in writer.records_path.read_text().splitlines()]
    assert [r["reward"] for r in row["responses"]] == [None, None]


def test_the_default_queue_holds_4096_rows_and_shutdown_waits_30_s(tmp_path: Path, checkpoint: Path) -> None:
    writer = new_writer(tmp_path, checkpoint)
    assert writer._queue.maxsize == 4096 and writer.shutdown_timeout_s == 30.0
    writer.close()


def test_close_flushes_for_at_most_its_timeout(tmp_path: Path, checkpoint: Path) -> None:
    writer = new_writer(tmp_path, checkpoint)
    real = writer._write_line
    writer._write_line = lambda line: (time.sleep(0.05), real(line))  # type: ignore[method-assign]
    for _ in range(100):
        writer.record_group(group("", "k", [response(0, 1.0)]))
    started = time.perf_counter()
    counters = writer.close(timeout_s=0.3)
    elapsed = time.perf_counter() - started
    assert 0.25 <= elapsed < 3.0, elapsed  # the rest of the queue would take 5 s
    assert counters["pending"] > 50 and counters["written"] < 50, counters
    assert writer.record_group(group("", "k", [])) is None  # closed: nothing more is taken


def test_layout_manifest_and_lineage_of_a_served_directory(tmp_path: Path, checkpoint: Path) -> None:
    protocol = build_protocol({"temperature": 0.7, "top_p": 1.0}, stop=["</s>"], zero_variance_filter=True)
    writer = new_writer(tmp_path, checkpoint, protocol=protocol, run_id="r42", rollout_seed=5,
                        selection_sha256="s" * 64, start_rollout_id=7, fresh=False)
    oid = writer.record_group(group("", "k1", [response(0, 1.0)]))
    assert writer.record_disposition(oid, "consumed", staleness=2)
    writer.close()

    files = [{"path": "config.json", "size": 13, "mtime_ns": (checkpoint / "config.json").stat().st_mtime_ns,
              "sha256": sha(checkpoint / "config.json")},
             {"path": "model.safetensors", "size": 64, "mtime_ns": (checkpoint / "model.safetensors").stat().st_mtime_ns}]
    lineage = hashlib.sha256(canonical({"source": str(checkpoint.resolve()), "files": files}).encode()).hexdigest()[:16]
    run_dir = tmp_path / "records" / lineage / "exp-r42"
    assert sorted(p.name for p in run_dir.iterdir()) == [f"manifest-{writer.attempt}.json", f"records-{writer.attempt}.jsonl"]
    manifest = json.loads((run_dir / f"manifest-{writer.attempt}.json").read_text())
    assert manifest["run"] == {"name": "exp", "id": "r42", "attempt": writer.attempt, "start_rollout_id": 7,
                               "checkpoint": str(checkpoint), "fresh": False}
    assert {k: manifest[k] for k in ("source", "lineage", "basis", "weights_hashed", "rollout_seed",
                                     "deterministic_inference", "selection_sha256")} == {
        "source": "train", "lineage": lineage, "basis": "served_directory_inventory", "weights_hashed": False,
        "rollout_seed": 5, "deterministic_inference": False, "selection_sha256": "s" * 64}
    assert manifest["protocol"] == protocol
    assert manifest["protocol_digest"] == hashlib.sha256(canonical(protocol).encode()).hexdigest()
    lines = [json.loads(line) for line in (run_dir / f"records-{writer.attempt}.jsonl").read_text().splitlines()]
    assert [r["kind"] for r in lines] == ["group", "disposition"]
    assert lines[1] == {"kind": "disposition", "observation_id": oid, "disposition": "consumed", "staleness": 2}
    assert lines[0]["observation_id"] == oid


def test_a_workflow_marker_fixes_the_lineage_and_a_resume_writes_beside(tmp_path: Path) -> None:
    marker = {"source": "/models/base", "files": [{"path": "config.json", "size": 10, "mtime": 1.5, "sha256": "ab"}]}
    copies = []
    for name in ("served-1", "served-2"):
        ck = tmp_path / name
        ck.mkdir()
        (ck / "workflow-model.json").write_text(json.dumps(marker, indent=1))
        copies.append(ck)
    expected = hashlib.sha256(canonical(marker).encode()).hexdigest()[:16]
    assert lineage_of(copies[0]) == lineage_of(copies[1]) == (expected, "workflow-model.json")
    first = new_writer(tmp_path, copies[0], run_id="r1")
    first.close()
    second = new_writer(tmp_path, copies[1], run_id="r1", fresh=False)
    second.close()
    run_dir = tmp_path / "records" / expected / "exp-r1"
    assert first.attempt != second.attempt
    assert sorted(p.name for p in run_dir.iterdir()) == sorted(
        f"{kind}-{a}.{ext}" for a in (first.attempt, second.attempt) for kind, ext in (("manifest", "json"), ("records", "jsonl")))


def test_an_unavailable_checkpoint_logs_one_error_and_records_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.ERROR, logger="rlprobe.records"):
        writer = new_writer(tmp_path, tmp_path / "missing")
        assert writer.record_group(group("", "k", [])) is None
        assert writer.record_disposition("x", "consumed") is False
        writer.close()
    assert not writer.enabled and len(caplog.records) == 1 and "off" in caplog.records[0].getMessage()
    assert not (tmp_path / "records").exists()


@pytest.mark.parametrize("policy, rate", [("off", None), ("all", None), ("sample", 0.5)])
def test_response_text_follows_the_policy(tmp_path: Path, checkpoint: Path, policy: str, rate: float | None) -> None:
    writer = new_writer(tmp_path, checkpoint, responses=policy, response_sample_rate=rate)
    for _ in range(40):
        writer.record_group(group("", "k", [dict(response(i, 1.0), response=f"text {i}") for i in range(2)]))
    writer.close()
    rows = [json.loads(line) for line in writer.records_path.read_text().splitlines()]
    with_text = [all("response" in r for r in row["responses"]) for row in rows]
    without_text = [not any("response" in r for r in row["responses"]) for row in rows]
    assert all(a or b for a, b in zip(with_text, without_text)), "text is kept or dropped for whole groups"
    assert [row["responses_included"] for row in rows] == with_text
    if policy == "off":
        assert not any(with_text)
    elif policy == "all":
        assert all(with_text)
    else:
        assert 8 <= sum(with_text) <= 32, sum(with_text)  # about half of 40, chosen by observation_id


def test_sample_needs_a_rate_and_only_sample_takes_one(tmp_path: Path, checkpoint: Path) -> None:
    with pytest.raises(ValueError, match="response_sample_rate"):
        new_writer(tmp_path, checkpoint, responses="sample")
    with pytest.raises(ValueError, match="response_sample_rate"):
        new_writer(tmp_path, checkpoint, responses="all", response_sample_rate=0.1)


def test_validity_and_policy_scope() -> None:
    assert validity({"a": "ok", "b": "completed"}) == {"valid": True, "components": {"a": "ok", "b": "completed"}}
    assert validity({"a": "ok"}, expected=["a", "b"])["valid"] is None
    assert validity({"a": "unknown", "b": "timeout"})["valid"] is False
    assert validity({"a": "judge_error"}, expected=["a"])["components"] == {"a": "judge_error"}
    assert policy_scope([0, 0], fresh=True) == "start_checkpoint"
    assert policy_scope([0], fresh=False) == "run_version"
    assert policy_scope([10], fresh=True) == "run_version"
    assert policy_scope([3, 4], fresh=True) == "mixed"


def test_group_from_samples_round_trips_through_the_writer_and_summary(tmp_path: Path, checkpoint: Path) -> None:
    protocol = build_protocol({"temperature": 1.0})
    writer = new_writer(tmp_path, checkpoint, protocol=protocol)
    digest = protocol_digest(protocol)
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "2+2?"}]
    row = group_from_samples(messages, ["4", "5", "four"], [1.0, 0.0, float("nan")], protocol_digest=digest,
                             verifiers=["math"], components={"math": [1.0, 0.0, None]}, completion_tokens=[1, 1, 3],
                             truncated=[False, False, True], targets={"answer": "4"})
    assert [r["validity"]["valid"] for r in row["responses"]] == [True, True, None]
    assert row["responses"][2]["reward"] is None and row["responses"][2]["status"] == "truncated"
    assert row["input_key"] == prompt_identity(messages, digest, targets={"answer": "4"})["input_key"]
    assert row["query_sha256"] == hashlib.sha256(b"2+2?").hexdigest()
    writer.record_group(row)
    writer.close()
    (prompt,) = summarize(tmp_path / "records").prompts
    assert prompt["input_key"] == row["input_key"] and prompt["policy_scope"] == "start_checkpoint"
    assert prompt["validity"] == {"valid": 2, "invalid": 0, "unknown": 1}
    assert prompt["valid_reward"]["histogram"] == [{"reward": 0.0, "count": 1}, {"reward": 1.0, "count": 1}]


# -- summarize ------------------------------------------------------------------------------------

def test_summarize_writes_the_hand_computed_files(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "summary"
    result = summarize(store, out)
    prompts = [json.loads(line) for line in (out / "prompts.jsonl").read_text().splitlines()]
    assert prompts == result.prompts
    k1, k2_run, k2_none = prompts
    # k1 under start_checkpoint: G1 (4 x 0, filtered), G2 (1, 0 valid; 0 invalid; 0 unknown), G5 (0.5, 0.5)
    assert (k1["input_key"], k1["policy_scope"], k1["task_key"], k1["query_sha256"]) == ("k1", "start_checkpoint", "task-k1", "query-k1")
    assert k1["groups"] == {"total": 3, "all_zero": 1, "constant": 1, "mixed": 1, "unscored": 0}
    assert k1["filter_decisions"] == {"passed": 2, "filtered": 1, "aborted": 0, "other": 0}
    assert k1["filter_reasons"] == [{"reason": "zero_std_0.0", "groups": 1}]
    assert (k1["responses"], k1["validity"], k1["truncated_responses"]) == (10, {"valid": 8, "invalid": 1, "unknown": 1}, 0)
    # valid rewards 0,0,0,0, 1,0, .5,.5: mean 2/8; squared deviations 5*.0625 + .5625 + 2*.0625 = 1.0 over 7
    assert k1["valid_reward"] == {"count": 8, "mean": 0.25, "variance": pytest.approx(1 / 7), "min": 0.0, "max": 1.0,
                                  "histogram": [{"reward": 0.0, "count": 5}, {"reward": 0.5, "count": 2},
                                                {"reward": 1.0, "count": 1}]}
    assert k1["unknown_validity_reward"] == {"count": 1, "mean": 0.0, "variance": None, "min": 0.0, "max": 0.0,
                                             "histogram": [{"reward": 0.0, "count": 1}]}
    assert k1["independent_units"] == 2 and k1["lineages"] == [LINEAGE]  # attempts a1 and b1
    assert (k2_run["policy_scope"], k2_run["groups"]["constant"], k2_run["independent_units"]) == ("run_version", 1, 1)
    assert k2_run["valid_reward"] == {"count": 2, "mean": 1.0, "variance": 0.0, "min": 1.0, "max": 1.0,
                                      "histogram": [{"reward": 1.0, "count": 2}]}
    assert k2_run["truncated_responses"] == 1
    assert k2_none["policy_scope"] is None and k2_none["groups"]["unscored"] == 1 and k2_none["responses"] == 0
    assert k2_none["filter_decisions"]["aborted"] == 1 and k2_none["valid_reward"]["count"] == 0

    tokens = json.loads((out / "tokens.json").read_text())
    keys = ("domain", "disposition", "groups", "responses", "tokens", "truncated_responses", "truncated_tokens")
    assert [tuple(r[k] for k in keys) for r in tokens["rows"]] == [
        ("code,math", "aborted", 1, 0, 0, 0, 0),
        ("math", "consumed", 1, 4, 80, 0, 0),
        ("math", "filtered:zero_std_0.0", 1, 4, 40, 0, 0),
        ("math", "unused", 2, 4, 18, 1, 7),  # G3 (5 + 7 tokens, 7 truncated) and G5 (3 + 3)
    ]

    summary = json.loads((out / "summary.json").read_text())
    files = sorted(p for p in store.rglob("*") if p.is_file())
    assert summary["inputs"] == [{"path": str(p.relative_to(store)), "kind": "manifest" if p.suffix == ".json" else "records",
                                  "size": p.stat().st_size, "sha256": sha(p)} for p in files]
    assert summary["lineages"] == [LINEAGE]
    assert [(p["lineage"], p["protocol_digest"], p["runs"]) for p in summary["protocols"]] == [(LINEAGE, PROTOCOL, 1)]
    assert {k: summary["counts"][k] for k in ("manifests", "record_files", "lines", "incomplete_lines", "group_rows",
                                              "disposition_rows", "responses", "input_keys", "runs", "attempts",
                                              "dispositions_without_group", "prompt_rows")} == {
        "manifests": 1, "record_files": 2, "lines": 8, "incomplete_lines": 1, "group_rows": 5, "disposition_rows": 2,
        "responses": 12, "input_keys": 2, "runs": 2, "attempts": 2, "dispositions_without_group": 1, "prompt_rows": 3}
    a_file, b_file = f"{LINEAGE}/exp-A/records-a1.jsonl", f"{LINEAGE}/exp-B/records-b1.jsonl"
    assert summary["warnings"] == [
        f"{b_file}: 1 disposition row(s) name no group row in the store (first: zzz)",
        f"{a_file}: incomplete final line (a stopped writer); 1 line skipped",
        f"{b_file}: record file without a manifest (no manifest with its attempt beside it); "
        "its lineage is taken from the folder name and it has no protocol",
    ]


def test_a_broken_manifest_and_a_broken_line_are_warnings(tmp_path: Path) -> None:
    root = tmp_path / "store"
    path = write_attempt(root, "exp-C", "c1", [group("g1", "k1", [response(0, 1.0)])])
    (path.parent / "manifest-c1.json").write_text('{"lineage": "aaaa", "protoc')
    path.write_text(path.read_text() + "not json\n" + json.dumps(group("g2", "k1", [response(0, 0.0)])) + "\n")
    result = summarize(root)
    assert result.warnings == [
        f"{LINEAGE}/exp-C/records-c1.jsonl: record file without a manifest (no manifest with its attempt beside it); "
        "its lineage is taken from the folder name and it has no protocol",
        f"{LINEAGE}/exp-C/records-c1.jsonl: 1 complete line(s) are not a JSON object and were skipped (first at line 2)",
        f"{LINEAGE}/exp-C/manifest-c1.json: the manifest is not a JSON object; its records count as without a manifest",
    ]
    assert result.summary["counts"]["group_rows"] == 2 and result.summary["protocols"] == []
    assert result.prompts[0]["groups"]["total"] == 2 and result.prompts[0]["lineages"] == [LINEAGE]


def test_summarize_a_lineage_directory_is_the_same_evidence(store: Path) -> None:
    whole, one = summarize(store), summarize(store / LINEAGE)
    assert whole.prompts == one.prompts
    assert [i["sha256"] for i in whole.summary["inputs"]] == [i["sha256"] for i in one.summary["inputs"]]


def test_summarize_cli_prints_warnings_and_writes_three_files(store: Path, tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["records", "summarize", str(store), "--output", str(tmp_path / "o")])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in (tmp_path / "o").iterdir()) == ["prompts.jsonl", "summary.json", "tokens.json"]
    assert result.stderr.count("warning: ") == 3
    assert "5 groups, 12 responses, 3 prompt rows from 2 record files" in result.stdout


@pytest.mark.parametrize("args, needle", [
    (["records", "summarize", "{tmp}/missing", "-o", "{tmp}/o"], "no such records store"),
    (["records", "summarize", "{tmp}", "-o", "{tmp}/o"], "holds no inference records"),
    (["records", "select", "{tmp}", "-o", "{tmp}/t.json"], "missing option '--skip'"),
])
def test_cli_errors_are_one_line_exit_2(tmp_path: Path, args: list[str], needle: str) -> None:
    result = CliRunner().invoke(cli, [a.format(tmp=tmp_path) for a in args])
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and needle.lower() in lines[0].lower() and "Traceback" not in result.stderr, result.stderr


# -- select ---------------------------------------------------------------------------------------

def test_the_bound_matches_the_spec_figures() -> None:
    assert round(upper_bound(0, 16), 2) == 0.17 and round(upper_bound(0, 32), 2) == 0.09
    assert upper_bound(0, 16) == pytest.approx(1 - 0.05 ** (1 / 16))
    assert upper_bound(1, 10) == pytest.approx(0.3942, abs=1e-4)  # Clopper-Pearson, one-sided 95%
    assert upper_bound(0, 0) == 1.0


def constant_prompt(key: str, reward: float, attempts: Sequence[str], per_attempt: int) -> dict[str, list[dict[str, Any]]]:
    return {a: [group(f"{key}-{a}", key, [response(i, reward) for i in range(per_attempt)])] for a in attempts}


def write_prompts(root: Path, prompts: list[dict[str, list[dict[str, Any]]]], **kwargs: Any) -> None:
    by_attempt: dict[str, list[dict[str, Any]]] = {}
    for prompt in prompts:
        for attempt, rows in prompt.items():
            by_attempt.setdefault(attempt, []).extend(rows)
    for attempt, rows in by_attempt.items():
        write_attempt(root, f"exp-{attempt}", attempt, rows, **kwargs)


def select_table(root: Path, *skip: str, **kwargs: Any) -> dict[str, Any]:
    kwargs.setdefault("readmit_fraction", 0.0)
    return build_selection(root, skip or ("all_zero",), **kwargs).table


def excluded_keys(table: dict[str, Any]) -> list[str]:
    return sorted(e["input_key"] for e in table["excluded"])


def test_select_excludes_only_enough_valid_constant_evidence(tmp_path: Path) -> None:
    root = tmp_path / "store"
    mixed = constant_prompt("mixed", 0.0, ["a", "b"], 8)
    mixed["b"][0]["responses"][5]["reward"] = 1.0
    half_invalid = constant_prompt("invalid", 0.0, ["a", "b"], 8)
    for r in half_invalid["b"][0]["responses"]:
        r["validity"]["valid"] = None
    write_prompts(root, [
        constant_prompt("zero", 0.0, ["a", "b"], 8),       # 16 valid zeros from 2 attempts: bound 0.17 < 0.2
        constant_prompt("zero15", 0.0, ["a", "b"], 8),     # one response made invalid below: 15
        constant_prompt("oneunit", 0.0, ["a"], 16),        # 16 zeros, one attempt
        constant_prompt("full", 1.0, ["a", "b"], 8),
        mixed, half_invalid,
    ])
    path = root / LINEAGE / "exp-b" / "records-b.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[1]["responses"][0]["validity"]["valid"] = False
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))

    assert excluded_keys(select_table(root, "all_zero")) == ["zero"]
    assert excluded_keys(select_table(root, "all_full")) == ["full"]
    assert excluded_keys(select_table(root, "zero_variance")) == ["full", "zero"]
    assert excluded_keys(select_table(root, "all_zero", min_observations=8, min_units=1)) == ["oneunit", "zero", "zero15"]
    # a stricter rate needs more evidence: 1 - 0.05^(1/16) = 0.17 is not below 0.15
    assert excluded_keys(select_table(root, "all_zero", max_deviation_rate=0.15)) == []
    table = select_table(root, "all_zero")
    (entry,) = table["excluded"]
    assert (entry["observations"], entry["units"], entry["rules"]) == (16, 2, ["all_zero"])
    assert entry["upper_bound"] == pytest.approx(1 - 0.05 ** (1 / 16))
    assert table["domains"] == [{"domain": "math", "verifiers": ["math"], "prompts": 6, "excluded": 1, "readmitted": 0}]
    assert (table["lineage"], table["protocol_digest"], table["approximate_policy"]) == (LINEAGE, PROTOCOL, False)


def test_deterministic_seeds_count_once(tmp_path: Path) -> None:
    """Two attempts with the same rollout seed, two groups of 16 each, repeat the same 16 seeds:
    16 observations from one unit. With different seeds they are 32 observations from two units."""
    same, other = tmp_path / "same", tmp_path / "other"
    for root, seeds in ((same, (7, 7)), (other, (7, 100))):
        for attempt, seed in zip(("a", "b"), seeds):
            rows = [group(f"{attempt}{g}", "zero", [response(i, 0.0) for i in range(16)]) for g in range(2)]
            write_attempt(root, f"exp-{attempt}", attempt, rows, rollout_seed=seed, deterministic=True)
    assert excluded_keys(select_table(same)) == []  # one unit < 2
    (entry,) = select_table(same, min_units=1)["excluded"]
    assert (entry["observations"], entry["units"], entry["responses"]) == (16, 1, 64)
    assert excluded_keys(select_table(same, min_units=1, min_observations=17)) == []
    (entry,) = select_table(other)["excluded"]
    assert (entry["observations"], entry["units"], entry["responses"]) == (32, 2, 64)
    assert entry["upper_bound"] == pytest.approx(1 - 0.05 ** (1 / 32))


def test_conflicting_rewards_for_one_seed_are_never_excluded(tmp_path: Path) -> None:
    """Seeds 7+0..7 and 100+0..7 give 16 zeros; a third attempt repeats seed 7 and scores sibling 0
    as 1. Counting the repeat once must not hide that it disagrees."""
    root = tmp_path / "store"
    write_attempt(root, "exp-a", "a", [group("a", "p", [response(i, 0.0) for i in range(8)])], rollout_seed=7, deterministic=True)
    write_attempt(root, "exp-b", "b", [group("b", "p", [response(i, 0.0) for i in range(8)])], rollout_seed=100, deterministic=True)
    assert excluded_keys(select_table(root)) == ["p"]
    write_attempt(root, "exp-c", "c", [group("c", "p", [response(0, 1.0)] + [response(i, 0.0) for i in range(1, 8)])],
                  rollout_seed=7, deterministic=True)
    assert excluded_keys(select_table(root, "all_zero", min_units=1)) == []
    assert excluded_keys(select_table(root, "zero_variance", min_units=1)) == []


def test_readmission_is_decided_by_the_seed_at_build_time(tmp_path: Path) -> None:
    root = tmp_path / "store"
    write_prompts(root, [constant_prompt(f"k{i:02d}", 0.0, ["a", "b"], 8) for i in range(40)])
    first = build_selection(root, ["all_zero"], readmit_fraction=0.5, seed=0)
    again = build_selection(root, ["all_zero"], readmit_fraction=0.5, seed=0)
    other = build_selection(root, ["all_zero"], readmit_fraction=0.5, seed=1)
    assert first.text == again.text and first.sha256 == again.sha256
    readmitted = sorted(e["input_key"] for e in first.table["readmitted"])
    assert readmitted == sorted(f"k{i:02d}" for i in range(40) if readmit_draw(0, f"k{i:02d}") < 0.5)
    assert 5 < len(readmitted) < 35
    assert sorted(readmitted + excluded_keys(first.table)) == [f"k{i:02d}" for i in range(40)]
    assert sorted(e["input_key"] for e in other.table["readmitted"]) != readmitted


def test_select_cli_prints_the_sha256_of_the_file_it_wrote(store: Path, tmp_path: Path) -> None:
    out = tmp_path / "sel" / "all-zero-v1.json"
    result = CliRunner().invoke(cli, ["records", "select", str(store), "--skip", "zero_variance", "--min-observations", "1",
                                      "--min-units", "1", "--max-deviation-rate", "1", "--readmit-fraction", "0", "--scope", "start_checkpoint",
                                      "--scope", "run_version", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == sha(out)
    table = json.loads(out.read_text())
    assert table["approximate_policy"] is True and table["rules"]["scopes"] == ["start_checkpoint", "run_version"]
    # run B has no manifest, so no protocol: only run A's evidence counts. k1 there is G1 (0,0,0,0) and
    # G2's valid 1 and 0: not constant; k2's two valid rewards of 1.0 are run_version evidence.
    assert [e["input_key"] for e in table["excluded"]] == ["k2"] and [d["prompts"] for d in table["domains"]] == [2]


def test_several_lineages_need_a_choice(tmp_path: Path) -> None:
    root = tmp_path / "store"
    write_attempt(root, "exp-a", "a", [group("a", "p", [response(0, 0.0)])], lineage="1111111111111111")
    write_attempt(root, "exp-b", "b", [group("b", "p", [response(0, 0.0)])], lineage="2222222222222222")
    with pytest.raises(RecordsAmbiguous, match="--lineage"):
        build_selection(root, ["all_zero"])
    assert build_selection(root, ["all_zero"], lineage="2222222222222222", min_observations=1, min_units=1,
                           max_deviation_rate=1.0, readmit_fraction=0).table["excluded"][0]["input_key"] == "p"
    result = CliRunner().invoke(cli, ["records", "select", str(root), "--skip", "all_zero", "-o", str(tmp_path / "t.json")])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1 and "2 lineages" in result.stderr


# -- loading and filtering ------------------------------------------------------------------------

@pytest.fixture()
def table_file(tmp_path: Path) -> tuple[Path, str]:
    root = tmp_path / "store"
    write_prompts(root, [constant_prompt(k, 0.0, ["a", "b"], 8) for k in ("k1", "k2", "k3")]
                  + [constant_prompt("k4", 1.0, ["a", "b"], 8)])
    path = tmp_path / "table.json"
    return path, build_selection(root, ["all_zero"], readmit_fraction=0).write(path)


def test_the_loader_checks_digest_lineage_and_protocol(table_file: tuple[Path, str]) -> None:
    path, digest = table_file
    with pytest.warns(UserWarning, match="verifier implementation"):
        table = load_selection(path, digest, lineage=LINEAGE, protocol_digest=PROTOCOL)
    assert table.excluded == {"k1", "k2", "k3"}
    with pytest.raises(SelectionMismatch, match="SHA-256"):
        load_selection(path, "0" * 64, lineage=LINEAGE, protocol_digest=PROTOCOL)
    with pytest.raises(SelectionMismatch, match="lineage"):
        load_selection(path, digest, lineage="b" * 16, protocol_digest=PROTOCOL)
    with pytest.raises(SelectionMismatch, match="protocol"):
        load_selection(path, digest, lineage=LINEAGE, protocol_digest="q" * 64)
    path.write_text(path.read_text().replace('"k1"', '"k9"'))
    with pytest.raises(SelectionMismatch, match="changed since it was pinned"):
        load_selection(path, digest, lineage=LINEAGE, protocol_digest=PROTOCOL)


def loaded(table_file: tuple[Path, str]) -> Any:
    with pytest.warns(UserWarning):
        return load_selection(table_file[0], table_file[1], lineage=LINEAGE, protocol_digest=PROTOCOL)


def test_the_filter_skips_excluded_prompts_in_order(table_file: tuple[Path, str], caplog: pytest.LogCaptureFixture) -> None:
    keep = SelectionFilter(loaded(table_file), key=lambda item: item["key"])
    items = [{"key": k, "n": i} for i, k in enumerate(["k1", "k4", "k2", "new", "k3", "k4"])]
    with caplog.at_level(logging.INFO, logger="rlprobe.records"):
        assert [i["n"] for i in keep(items)] == [1, 3, 5]
    assert keep.skipped == {"math": 3}
    assert "skipped 3 math" in caplog.text


def test_a_whole_dataset_of_consecutive_exclusions_fails(table_file: tuple[Path, str]) -> None:
    keep = SelectionFilter(loaded(table_file), key=lambda k: k)
    with pytest.raises(SelectionExhausted, match="3 consecutive"):
        list(keep(["k1", "k2", "k3"]))

    def endless() -> Iterator[str]:
        while True:
            yield from ("k1", "k2", "k3")

    stream = keep(endless(), dataset_size=3)
    with pytest.raises(SelectionExhausted):
        next(stream)
    assert list(keep(["k1", "k2", "k4", "k3"], dataset_size=3)) == ["k4"]  # runs of 2 < 3


def test_the_filter_on_a_datasets_dataset(table_file: tuple[Path, str]) -> None:
    datasets = pytest.importorskip("datasets")
    keep = SelectionFilter(loaded(table_file), key=lambda row: row["key"])
    ds = datasets.Dataset.from_dict({"key": ["k1", "k4", "new", "k2"], "n": [0, 1, 2, 3]})
    assert keep.dataset(ds)["n"] == [1, 2]
    with pytest.raises(SelectionExhausted):
        keep.dataset(datasets.Dataset.from_dict({"key": ["k1", "k2"]}))


# -- the SQL stays out of the run views ------------------------------------------------------------

def test_records_sql_is_not_part_of_the_run_views(tmp_path: Path) -> None:
    from rlprobe.records.sqlstore import records_sql
    from rlprobe.store import sqlfiles
    from rlprobe.store.engine import Target, init_script

    names = {f.name for f in records_sql()}
    assert {"records_files", "records_lines", "records_prompts", "records_evidence"} <= names
    assert not names & {f.name for f in sqlfiles.load(1)}
    script = init_script(Target(tmp_path, "root"))
    assert not [n for n in names if f" {n} " in script or f" {n}(" in script] and "read_blob" not in script
