"""The thresholds that move a node between healthy, suspect and quarantined, and their evaluation.

``assess`` looks at what a node's state holds (recent signals and failure attributions, the
current run of hot temperature readings, recent throughput ratios) at a point in time and says
which level the evidence supports and which rule fired. Quarantine rules are checked first; the
first rule that holds names the change. Leaving quarantine is not decided here: only passing
diagnostics return a node to service (``node-state``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from fastci.contracts.node_states import MAX_EVIDENCE, NodeEvidence
from fastci.fleet.slowness import Level, SlowGate, SlowVerdict, judge

# XIDs that mean the hardware (or its firmware) failed, whatever the application did.
FATAL_XIDS: dict[int, str] = {
    48: "double-bit ECC error",
    62: "internal micro-controller halt",
    64: "ECC page retirement or row remapping failure",
    74: "NVLink error",
    79: "GPU has fallen off the bus",
    92: "high single-bit ECC error rate",
    95: "uncontained ECC error",
    119: "GSP RPC timeout",
    120: "GSP error",
}
HARDWARE_SIGNALS: frozenset[str] = frozenset({"xid", "ecc", "nccl_timeout", "temperature", "heartbeat"})


@dataclass(frozen=True)
class NodeRules:
    window: timedelta = timedelta(hours=24)  # signals and failure attributions count this long
    xid_repeated: int = 3  # XIDs of any kind in the window: quarantine
    nccl_repeated: int = 3  # NCCL timeouts in the window: quarantine (one: suspect)
    temperature_limit_c: float = 90.0
    temperature_suspect: int = 3  # consecutive readings over the limit
    temperature_quarantine: int = 8
    heartbeat_suspect_s: float = 120.0  # a gap between heartbeats longer than this
    heartbeat_quarantine_s: float = 600.0
    failures_suspect: int = 2  # failure attributions in the window
    failures_quarantine: int = 4  # ... on at least this many distinct tests:
    failures_quarantine_tests: int = 2
    signal_and_failures: int = 2  # failure attributions that, with any hardware signal, quarantine
    rerun_window: timedelta = timedelta(hours=24)  # failures this long before a quarantine are rerun
    slow: SlowGate = field(default_factory=SlowGate)


RULES = NodeRules()


@dataclass(frozen=True)
class Assessment:
    level: Level
    rule: str | None
    reason: str
    evidence: tuple[NodeEvidence, ...] = ()
    slow: SlowVerdict | None = None


def assess(
    evidence: Sequence[NodeEvidence],
    hot_readings: int,
    ratios: Sequence[NodeEvidence],
    now: datetime,
    seed: int,
    rules: NodeRules = RULES,
) -> Assessment:
    """The level the node's recent evidence supports at ``now``, and why."""
    recent = _window(evidence, hot_readings, ratios, now, seed, rules)
    finding = _quarantine(recent, rules) or _suspect(recent, rules)
    if finding is None:
        return Assessment("healthy", None, "no evidence against it in the window", (), recent.slow)
    level, rule, reason, items = finding
    return Assessment(level, rule, reason, tuple(items)[-MAX_EVIDENCE:], recent.slow)


# A rule that holds: the level, the rule's name, why in words, and the evidence it counted.
_Finding = tuple[Level, str, str, Sequence[NodeEvidence]]


@dataclass(frozen=True)
class _Window:
    """A node's evidence in the rules' window, sorted by what the rules count."""

    xids: list[NodeEvidence]
    fatal: list[NodeEvidence]  # XIDs of a fatal kind
    ecc: list[NodeEvidence]  # uncorrectable ECC errors
    nccl: list[NodeEvidence]
    nccl_count: float
    hot_readings: int  # the current run of readings over the temperature limit
    hot: list[NodeEvidence]  # ... as evidence
    gaps: list[NodeEvidence]  # heartbeat gaps
    lost: list[NodeEvidence]  # ... longer than the quarantine limit
    failures: list[NodeEvidence]  # failure attributions
    failed_tests: set[str | None]
    signals: list[NodeEvidence]  # hardware signals of any kind
    kept: list[NodeEvidence]  # the throughput ratios the slow-node gate judged
    slow: SlowVerdict
    hours: str  # the window, in words


def _window(
    evidence: Sequence[NodeEvidence],
    hot_readings: int,
    ratios: Sequence[NodeEvidence],
    now: datetime,
    seed: int,
    rules: NodeRules,
) -> _Window:
    recent = [e for e in evidence if e.time > now - rules.window]
    xids = [e for e in recent if e.kind == "xid"]
    nccl = [e for e in recent if e.kind == "nccl_timeout"]
    gaps = [e for e in recent if e.kind == "heartbeat"]
    failures = [e for e in recent if e.kind == "failure"]
    kept = [r for r in ratios if r.time > now - rules.slow.window][-rules.slow.max_runs :]
    return _Window(
        xids=xids,
        fatal=[e for e in xids if e.value is not None and int(e.value) in FATAL_XIDS],
        ecc=[e for e in recent if e.kind == "ecc" and (e.value or 0) > 0],
        nccl=nccl,
        nccl_count=sum(e.value or 0 for e in nccl),
        hot_readings=hot_readings,
        hot=[e for e in recent if e.kind == "temperature"][-max(hot_readings, 1) :] if hot_readings else [],
        gaps=gaps,
        lost=[e for e in gaps if (e.value or 0) > rules.heartbeat_quarantine_s],
        failures=failures,
        failed_tests={e.test_id for e in failures},
        signals=[e for e in recent if e.kind in HARDWARE_SIGNALS],
        kept=kept,
        slow=judge([r.value or 1.0 for r in kept], seed, rules.slow),
        hours=f"{rules.window.total_seconds() / 3600:g} h",
    )


def _quarantine(w: _Window, rules: NodeRules) -> _Finding | None:
    """The first quarantine rule that holds, or None."""
    if w.fatal:
        code = int(w.fatal[-1].value or 0)
        return "quarantine", "xid-fatal", f"XID {code} ({FATAL_XIDS[code]}): a fatal kind", w.fatal
    if w.ecc:
        errors = int(sum(e.value or 0 for e in w.ecc))
        return "quarantine", "ecc-uncorrectable", f"{errors} uncorrectable ECC error(s)", w.ecc
    if w.lost:
        longest = max(e.value or 0 for e in w.lost)
        reason = f"no heartbeat for {longest:.0f} s (limit {rules.heartbeat_quarantine_s:.0f} s)"
        return "quarantine", "heartbeat-lost", reason, w.lost
    if len(w.xids) >= rules.xid_repeated:
        reason = f"{len(w.xids)} XIDs in {w.hours} ({_xid_list(w.xids)}; limit {rules.xid_repeated})"
        return "quarantine", "xid-repeated", reason, w.xids
    if w.nccl_count >= rules.nccl_repeated:
        reason = f"{w.nccl_count:.0f} NCCL timeouts in {w.hours} (limit {rules.nccl_repeated})"
        return "quarantine", "nccl-repeated", reason, w.nccl
    if w.hot_readings >= rules.temperature_quarantine:
        reason = (
            f"{w.hot_readings} readings in a row over {rules.temperature_limit_c:g} C "
            f"(limit {rules.temperature_quarantine})"
        )
        return "quarantine", "temperature-sustained", reason, w.hot
    if len(w.failures) >= rules.failures_quarantine and len(w.failed_tests) >= rules.failures_quarantine_tests:
        reason = (
            f"{len(w.failures)} failures on {len(w.failed_tests)} tests in {w.hours} that passed on other nodes "
            f"(limit {rules.failures_quarantine} on {rules.failures_quarantine_tests} tests)"
        )
        return "quarantine", "failures-attributed", reason, w.failures
    if w.signals and len(w.failures) >= rules.signal_and_failures:
        reason = f"{_signal_list(w.signals)} and {len(w.failures)} failures that passed on other nodes, in {w.hours}"
        return "quarantine", "signal-and-failures", reason, [*w.signals, *w.failures]
    if w.slow.level == "quarantine":
        return "quarantine", "throughput-slow", f"slower than other nodes: {w.slow.describe()}", w.kept
    return None


def _suspect(w: _Window, rules: NodeRules) -> _Finding | None:
    """The first suspect rule that holds, or None (asked only when no quarantine rule holds)."""
    if w.xids:
        return "suspect", "xid", f"{len(w.xids)} XID(s) in {w.hours} ({_xid_list(w.xids)})", w.xids
    if w.nccl:
        return "suspect", "nccl-timeout", f"{w.nccl_count:.0f} NCCL timeout(s) in {w.hours}", w.nccl
    if w.hot_readings >= rules.temperature_suspect:
        reason = f"{w.hot_readings} readings in a row over {rules.temperature_limit_c:g} C"
        return "suspect", "temperature-high", reason, w.hot
    if w.gaps:
        longest = max(e.value or 0 for e in w.gaps)
        reason = f"a heartbeat gap of {longest:.0f} s (limit {rules.heartbeat_suspect_s:.0f} s)"
        return "suspect", "heartbeat-missed", reason, w.gaps
    if len(w.failures) >= rules.failures_suspect:
        reason = (
            f"{len(w.failures)} failures in {w.hours} of tests that passed on other nodes ({_test_list(w.failures)})"
        )
        return "suspect", "failures-attributed", reason, w.failures
    if w.slow.level == "suspect":
        return "suspect", "throughput-slow", f"slower than other nodes: {w.slow.describe()}", w.kept
    return None


def _xid_list(xids: Sequence[NodeEvidence]) -> str:
    return ", ".join(f"XID {int(e.value or 0)} at {e.time:%m-%d %H:%M}" for e in xids[-4:])


def _test_list(failures: Sequence[NodeEvidence]) -> str:
    tests = sorted({e.test_id or "?" for e in failures})
    return ", ".join(tests[:3]) + (f" and {len(tests) - 3} more" if len(tests) > 3 else "")


def _signal_list(signals: Sequence[NodeEvidence]) -> str:
    kinds = sorted({e.kind for e in signals})
    return " and ".join(f"{sum(e.kind == k for e in signals)} {k.replace('_', ' ')} signal(s)" for k in kinds)
