"""The evidence about one bundle, read from the DuckDB views of a fastci data dir, each result with
its provenance checked against the verifier's keys."""

from __future__ import annotations

from collections.abc import Mapping

from fastci.contracts.regression_alerts import RegressionAlert
from fastci.core.provenance import verify
from fastci.inputs import BUNDLE_LAYERS, Bundle
from fastci.release.gates import Evidence, TestResult
from fastci.report.nightly import load
from fastci.views.store import Views

# Every trusted result on the bundle with its eval ratio (a qualification training result's
# 'eval_ratio' metric, else its golden gate's eval check) and its provenance. Not only the latest per
# test: which one is latest is decided among the results whose provenance counts (release.gates).
_RESULTS = """
SELECT f.test_id, f.model, f.precision, f."check", f.hardware_revision, f.tier, f.status, f.gate_passed,
       coalesce(f.gate_failing, ''),
       coalesce(TRY_CAST(json_extract(r.metrics, '$.eval_ratio[0]') AS DOUBLE), g.eval_ratio) AS eval_ratio,
       f.time, f._offset, f.result_id, f.run_id, {provenance}
FROM result_facts f
JOIN results r ON r.id = f.result_id
LEFT JOIN (
    SELECT result_id, min(c.ratio) AS eval_ratio
    FROM (SELECT result_id, unnest(from_json(checks, '[{"kind": "VARCHAR", "ratio": "DOUBLE"}]')) AS c
          FROM gate_results)
    WHERE c.kind = 'eval' AND c.ratio IS NOT NULL GROUP BY result_id
) g ON g.result_id = f.result_id
WHERE f.tier IS NOT NULL AND NOT f.excluded AND f.status <> 'skipped' AND {bundle}
"""


def collect(views: Views, bundle: Bundle, keys: Mapping[str, bytes]) -> Evidence:
    """The results on ``bundle`` (provenance verified with ``keys``, principal -> key) and the alerts."""
    where = " AND ".join(f"f.bundle.{layer} = ?" for layer in BUNDLE_LAYERS)
    _, columns = views.query("SELECT column_name FROM information_schema.columns WHERE table_name = 'results'")
    signed = ("provenance",) in columns  # a views file from before provenance, read as is: nothing is signed
    provenance = "r.provenance.principal, r.provenance.digest, r.provenance.signature" if signed else "NULL, NULL, NULL"
    query = _RESULTS.replace("{bundle}", where).replace("{provenance}", provenance)
    _, rows = views.query(query, [getattr(bundle, layer) for layer in BUNDLE_LAYERS])
    results = []
    for row in rows:
        signed = None if row[14] is None else {"principal": row[14], "digest": row[15], "signature": row[16]}
        verdict = verify(keys, row[12], row[13], signed)
        results.append(
            TestResult(
                test_id=row[0],
                model=row[1],
                precision=row[2],
                check=row[3],
                hardware_revision=row[4],
                tier=row[5],
                status=row[6],
                gate_passed=row[7],
                gate_failing=row[8],
                eval_ratio=row[9],
                time=row[10],
                offset=row[11],
                run_id=row[13],
                principal=verdict.principal,
                provenance_problem=verdict.problem,
                forged=verdict.forged,
            )
        )
    return Evidence(bundle=bundle, results=results, alerts=load(views, RegressionAlert))
