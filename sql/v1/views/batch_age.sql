-- name: batch_age
-- kind: view
-- depends: src_rollout_trace, src_manifest
-- doc: Per run and trained step, the batch age from the rollout trace: the token-weighted number
-- doc: of policy updates between generating a token and training on it (trained_version minus
-- doc: the token-weighted mean version), over the groups published for the step. A group's
-- doc: tokens by version come from its group_publish's tokens_by_version, or else are derived
-- doc: from its sealed calls: a call's tokens count under the version it began on until a refit
-- doc: paused it, then under the version that refit installed. A call restored by
-- doc: rollout_resume takes the version, tokens and refits of the latest earlier sealed call of
-- doc: another run with the same prompt_id and generation_index. A step trained again (a
-- doc: resumed run) keeps the later value. Same rules and numbers as
-- doc: rlprobe.rollouts.batch_age_by_step; steps with no trained tokens have no row.
-- columns: run_id VARCHAR, step BIGINT, batch_age DOUBLE, tokens BIGINT, trained_version BIGINT,
-- columns: groups BIGINT, derived_groups BIGINT, trace_run_id VARCHAR, t DOUBLE, trace_file VARCHAR

CREATE OR REPLACE VIEW v1.batch_age AS
WITH ev AS MATERIALIZED (
    SELECT * FROM v1.src_rollout_trace
), refit_calls AS (
    -- one row per call a refit paused
    SELECT x.trace_file, x.trace_run_id, x.seq, x.new_version, u.c.attempt_id AS attempt_id,
           u.c.tokens_so_far AS so_far
    FROM ev AS x
    CROSS JOIN unnest(x.calls) AS u(c)
    WHERE x.event = 'refit' AND x.new_version IS NOT NULL
), defs AS (
    -- every (re)definition of an attempt in its run: a dispatch (generating) or a resume
    -- (restored); the next definition of the same attempt ends it
    SELECT
        trace_file, trace_run_id, attempt_id, seq AS d, event = 'rollout_resume' AS resumed,
        group_id, prompt_id, generation_index, version, tokens AS given_tokens,
        coalesce(lead(seq) OVER (PARTITION BY trace_file, trace_run_id, attempt_id ORDER BY seq),
                 9223372036854775807) AS next_d
    FROM ev
    WHERE attempt_id IS NOT NULL
      AND (event = 'rollout_resume' OR (event = 'rollout_dispatch' AND version IS NOT NULL))
), ends AS (
    -- the first abandon, refusal or group discard after a definition ends the call
    SELECT
        d.trace_file, d.trace_run_id, d.attempt_id, d.d,
        least(
            d.next_d,
            coalesce((SELECT min(x.seq) FROM ev AS x
                      WHERE x.event IN ('rollout_abandon', 'rollout_refusal') AND x.trace_file = d.trace_file
                        AND x.trace_run_id IS NOT DISTINCT FROM d.trace_run_id AND x.attempt_id = d.attempt_id
                        AND x.seq > d.d), 9223372036854775807),
            coalesce((SELECT min(x.seq) FROM ev AS x
                      WHERE x.event = 'group_discard' AND x.trace_file = d.trace_file
                        AND x.trace_run_id IS NOT DISTINCT FROM d.trace_run_id AND x.group_id = d.group_id
                        AND x.seq > d.d), 9223372036854775807)) AS live_until
    FROM defs AS d
), seals AS (
    SELECT s.trace_file, s.trace_run_id, s.attempt_id, s.seq, s.tokens, f.d
    FROM ev AS s
    JOIN defs AS f
      ON f.trace_file = s.trace_file AND f.trace_run_id IS NOT DISTINCT FROM s.trace_run_id
     AND f.attempt_id = s.attempt_id AND s.seq > f.d AND s.seq < f.next_d AND NOT f.resumed
    JOIN ends AS e
      ON e.trace_file = f.trace_file AND e.trace_run_id IS NOT DISTINCT FROM f.trace_run_id
     AND e.attempt_id = f.attempt_id AND e.d = f.d AND s.seq < e.live_until
    WHERE s.event = 'rollout_seal' AND s.tokens IS NOT NULL
), publishes AS (
    SELECT trace_file, run_dir, trace_run_id, group_id, step, seq, tokens_by_version
    FROM ev WHERE event = 'group_publish'
), ready AS (
    -- when a call first holds tokens: a generating call at its first seal, a resumed one at once
    SELECT f.*, e.live_until,
           CASE WHEN f.resumed THEN f.d ELSE (SELECT min(s.seq) FROM seals AS s
               WHERE s.trace_file = f.trace_file AND s.trace_run_id IS NOT DISTINCT FROM f.trace_run_id
                 AND s.attempt_id = f.attempt_id AND s.d = f.d) END AS ready_at
    FROM defs AS f
    JOIN ends AS e
      ON e.trace_file = f.trace_file AND e.trace_run_id IS NOT DISTINCT FROM f.trace_run_id
     AND e.attempt_id = f.attempt_id AND e.d = f.d
), consumed AS (
    -- the group_publish that trains a call: its group's first publish after it holds tokens,
    -- while it is still live
    SELECT r.*, (SELECT min(p.seq) FROM publishes AS p
                 WHERE p.trace_file = r.trace_file AND p.trace_run_id IS NOT DISTINCT FROM r.trace_run_id
                   AND p.group_id = r.group_id AND p.seq > r.ready_at AND p.seq < r.live_until) AS published_at
    FROM ready AS r
    WHERE r.ready_at IS NOT NULL
), generated AS (
    -- seals a resumed run can match: while the generating call was live (before its publish)
    SELECT s.trace_file, s.trace_run_id, s.attempt_id, s.seq, s.tokens, s.d,
           c.prompt_id, c.generation_index, c.version
    FROM seals AS s
    JOIN consumed AS c
      ON c.trace_file = s.trace_file AND c.trace_run_id IS NOT DISTINCT FROM s.trace_run_id
     AND c.attempt_id = s.attempt_id AND c.d = s.d
    WHERE s.seq <= coalesce(c.published_at, 9223372036854775807)
      AND c.prompt_id IS NOT NULL AND c.generation_index IS NOT NULL
), matched AS (
    -- a resumed call: the latest earlier generated seal of its prompt and generation_index,
    -- if that came from another run
    SELECT c.trace_file, c.trace_run_id, c.attempt_id, c.d,
           (SELECT arg_max({'run': g.trace_run_id, 'version': g.version, 'tokens': g.tokens,
                            'attempt_id': g.attempt_id, 'd': g.d, 'seq': g.seq}, g.seq)
            FROM generated AS g
            WHERE g.trace_file = c.trace_file AND g.prompt_id = c.prompt_id
              AND g.generation_index = c.generation_index AND g.seq < c.d) AS src
    FROM consumed AS c
    WHERE c.resumed
), calls AS (
    -- every trained call: its run, publish, began version, tokens, and whose refits cut it
    SELECT c.trace_file, c.trace_run_id, c.published_at,
           c.version AS began,
           (SELECT arg_max(s.tokens, s.seq) FROM seals AS s
            WHERE s.trace_file = c.trace_file AND s.trace_run_id IS NOT DISTINCT FROM c.trace_run_id
              AND s.attempt_id = c.attempt_id AND s.d = c.d AND s.seq < c.published_at) AS tokens,
           c.trace_run_id AS cut_run, c.attempt_id AS cut_attempt, c.d AS cut_from, c.published_at AS cut_to
    FROM consumed AS c
    WHERE NOT c.resumed AND c.published_at IS NOT NULL
    UNION ALL
    -- a resumed call without a usable match counts its own version and tokens, if it has both
    SELECT trace_file, trace_run_id, published_at,
           CASE WHEN usable THEN src.version ELSE version END,
           CASE WHEN usable THEN src.tokens ELSE given_tokens END,
           CASE WHEN usable THEN src.run END,
           CASE WHEN usable THEN src.attempt_id END,
           CASE WHEN usable THEN src.d END,
           CASE WHEN usable THEN src.seq END
    FROM (
        SELECT c.*, m.src, m.src IS NOT NULL AND m.src.run IS DISTINCT FROM c.trace_run_id AS usable
        FROM consumed AS c
        JOIN matched AS m
          ON m.trace_file = c.trace_file AND m.trace_run_id IS NOT DISTINCT FROM c.trace_run_id
         AND m.attempt_id = c.attempt_id AND m.d = c.d
        WHERE c.resumed AND c.published_at IS NOT NULL)
), calls_ok AS (
    SELECT *, row_number() OVER () AS call_no
    FROM calls
    WHERE began IS NOT NULL AND tokens IS NOT NULL
), cut_points AS (
    -- refits that paused a trained call (or, for a resumed one, its source call) in its run
    SELECT k.call_no, x.seq, x.so_far, x.new_version
    FROM calls_ok AS k
    JOIN refit_calls AS x
      ON x.trace_file = k.trace_file AND x.trace_run_id IS NOT DISTINCT FROM k.cut_run
     AND x.attempt_id = k.cut_attempt AND x.seq > k.cut_from AND x.seq < k.cut_to
), positions AS (
    -- cut positions made non-decreasing and clamped to [0, tokens]
    SELECT p.call_no, p.seq, p.new_version AS version,
           least(greatest(max(p.so_far) OVER (PARTITION BY p.call_no ORDER BY p.seq
                                              ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW), 0),
                 greatest(k.tokens, 0)) AS pos
    FROM cut_points AS p
    JOIN calls_ok AS k ON k.call_no = p.call_no
    UNION ALL
    SELECT call_no, -1 AS seq, began AS version, 0 AS pos FROM calls_ok
), segments AS (
    SELECT s.call_no, s.version,
           coalesce(lead(s.pos) OVER (PARTITION BY s.call_no ORDER BY s.seq), greatest(k.tokens, 0)) - s.pos AS tokens
    FROM positions AS s
    JOIN calls_ok AS k ON k.call_no = s.call_no
), derived AS (
    SELECT k.trace_file, k.trace_run_id, k.published_at AS seq,
           sum(g.tokens) AS tokens, sum(g.tokens * g.version) AS version_sum
    FROM segments AS g
    JOIN calls_ok AS k ON k.call_no = g.call_no
    GROUP BY ALL
), given AS (
    SELECT p.trace_file, p.trace_run_id, p.seq,
           coalesce(list_sum(list_transform(p.tokens_by_version, lambda e: e.tokens)), 0) AS tokens,
           coalesce(list_sum(list_transform(p.tokens_by_version, lambda e: e.tokens * e.version)), 0) AS version_sum
    FROM publishes AS p
    WHERE p.tokens_by_version IS NOT NULL
), group_sums AS (
    SELECT p.trace_file, p.run_dir, p.trace_run_id, p.step, p.seq,
           p.tokens_by_version IS NULL AS derived,
           CASE WHEN p.tokens_by_version IS NULL THEN coalesce(d.tokens, 0) ELSE g.tokens END AS tokens,
           CASE WHEN p.tokens_by_version IS NULL THEN coalesce(d.version_sum, 0) ELSE g.version_sum END AS version_sum
    FROM publishes AS p
    LEFT JOIN derived AS d
      ON d.trace_file = p.trace_file AND d.trace_run_id IS NOT DISTINCT FROM p.trace_run_id AND d.seq = p.seq
    LEFT JOIN given AS g
      ON g.trace_file = p.trace_file AND g.trace_run_id IS NOT DISTINCT FROM p.trace_run_id AND g.seq = p.seq
    WHERE p.step IS NOT NULL
), trains AS (
    SELECT trace_file, run_dir, trace_run_id, step, trained_version, seq, t
    FROM ev WHERE event = 'train_step' AND step IS NOT NULL AND trained_version IS NOT NULL
), assigned AS (
    -- a published group goes to its run's next train_step of its step
    SELECT s.*, (SELECT min(x.seq) FROM trains AS x
                 WHERE x.trace_file = s.trace_file AND x.trace_run_id IS NOT DISTINCT FROM s.trace_run_id
                   AND x.step = s.step AND x.seq > s.seq) AS train_seq
    FROM group_sums AS s
), per_train AS (
    SELECT x.trace_file, x.run_dir, x.trace_run_id, x.step, x.trained_version, x.seq, x.t,
           count(*) AS groups, count(*) FILTER (WHERE a.derived) AS derived_groups,
           sum(a.tokens) AS tokens, sum(a.version_sum) AS version_sum
    FROM trains AS x
    JOIN assigned AS a
      ON a.trace_file = x.trace_file AND a.trace_run_id IS NOT DISTINCT FROM x.trace_run_id
     AND a.step = x.step AND a.train_seq = x.seq
    GROUP BY ALL
    HAVING sum(a.tokens) > 0
), latest AS (
    -- the later training of a step wins: by line within a file, by time across files
    SELECT *
    FROM per_train
    QUALIFY row_number() OVER (PARTITION BY trace_file, step ORDER BY seq DESC) = 1
)
SELECT
    coalesce(m.run_id, regexp_replace(regexp_extract(l.run_dir, '[^/]*$', 0), '\.jsonl$', '')) AS run_id,
    l.step,
    l.trained_version - l.version_sum::DOUBLE / l.tokens AS batch_age,
    CAST(l.tokens AS BIGINT) AS tokens,
    l.trained_version,
    l.groups,
    l.derived_groups,
    l.trace_run_id,
    l.t,
    l.trace_file
FROM latest AS l
LEFT JOIN v1.src_manifest AS m ON m.run_dir = l.run_dir
QUALIFY row_number() OVER (PARTITION BY l.run_dir, l.step ORDER BY l.t DESC NULLS LAST, l.trace_file DESC) = 1;
