-- name: records_protocols
-- kind: query
-- depends: records_manifests
-- doc: The lineages and protocols the store's readable manifests declare, with their protocol,
-- doc: how many runs and attempts recorded under each, and whether they used deterministic inference.
-- columns: lineage VARCHAR, protocol_digest VARCHAR, protocol VARCHAR, runs BIGINT,
-- columns: attempts BIGINT, deterministic_inference BOOLEAN

SELECT
    lineage,
    protocol_digest,
    CAST(min(CAST(protocol AS VARCHAR)) AS VARCHAR) AS protocol,
    count(DISTINCT run_dir) AS runs,
    count(*) AS attempts,
    bool_or(deterministic_inference) AS deterministic_inference
FROM records_manifests
WHERE ok
GROUP BY lineage, protocol_digest
ORDER BY lineage, protocol_digest
