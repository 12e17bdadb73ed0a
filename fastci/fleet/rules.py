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
    recent = [e for e in evidence if e.time > now - rules.window]
    xids = [e for e in recent if e.kind == "xid"]
    fatal = [e for e in xids if e.value is not None and int(e.value) in FATAL_XIDS]
    ecc = [e for e in recent if e.kind == "ecc" and (e.value or 0) > 0]
    nccl = [e for e in recent if e.kind == "nccl_timeout"]
    nccl_count = sum(e.value or 0 for e in nccl)
    hot = [e for e in recent if e.kind == "temperature"][-max(hot_readings, 1) :] if hot_readings else []
    gaps = [e for e in recent if e.kind == "heartbeat"]
    lost = [e for e in gaps if (e.value or 0) > rules.heartbeat_quarantine_s]
    failures = [e for e in recent if e.kind == "failure"]
    failed_tests = {e.test_id for e in failures}
    signals = [e for e in recent if e.kind in HARDWARE_SIGNALS]
    kept = [r for r in ratios if r.time > now - rules.slow.window][-rules.slow.max_runs :]
    slow = judge([r.value or 1.0 for r in kept], seed, rules.slow)
    hours = f"{rules.window.total_seconds() / 3600:g} h"

    def found(level: Level, rule: str, reason: str, items: Sequence[NodeEvidence]) -> Assessment:
        return Assessment(level, rule, reason, tuple(items)[-MAX_EVIDENCE:], slow)

    if fatal:
        code = int(fatal[-1].value or 0)
        return found("quarantine", "xid-fatal", f"XID {code} ({FATAL_XIDS[code]}): a fatal kind", fatal)
    if ecc:
        return found(
            "quarantine", "ecc-uncorrectable", f"{int(sum(e.value or 0 for e in ecc))} uncorrectable ECC error(s)", ecc
        )
    if lost:
        return found(
            "quarantine",
            "heartbeat-lost",
            f"no heartbeat for {max(e.value or 0 for e in lost):.0f} s (limit {rules.heartbeat_quarantine_s:.0f} s)",
            lost,
        )
    if len(xids) >= rules.xid_repeated:
        return found(
            "quarantine",
            "xid-repeated",
            f"{len(xids)} XIDs in {hours} ({_xid_list(xids)}; limit {rules.xid_repeated})",
            xids,
        )
    if nccl_count >= rules.nccl_repeated:
        return found(
            "quarantine",
            "nccl-repeated",
            f"{nccl_count:.0f} NCCL timeouts in {hours} (limit {rules.nccl_repeated})",
            nccl,
        )
    if hot_readings >= rules.temperature_quarantine:
        return found(
            "quarantine",
            "temperature-sustained",
            f"{hot_readings} readings in a row over {rules.temperature_limit_c:g} C "
            f"(limit {rules.temperature_quarantine})",
            hot,
        )
    if len(failures) >= rules.failures_quarantine and len(failed_tests) >= rules.failures_quarantine_tests:
        return found(
            "quarantine",
            "failures-attributed",
            f"{len(failures)} failures on {len(failed_tests)} tests in {hours} that passed on other nodes "
            f"(limit {rules.failures_quarantine} on {rules.failures_quarantine_tests} tests)",
            failures,
        )
    if signals and len(failures) >= rules.signal_and_failures:
        return found(
            "quarantine",
            "signal-and-failures",
            f"{_signal_list(signals)} and {len(failures)} failures that passed on other nodes, in {hours}",
            [*signals, *failures],
        )
    if slow.level == "quarantine":
        return found("quarantine", "throughput-slow", f"slower than other nodes: {slow.describe()}", kept)
    if xids:
        return found("suspect", "xid", f"{len(xids)} XID(s) in {hours} ({_xid_list(xids)})", xids)
    if nccl:
        return found("suspect", "nccl-timeout", f"{nccl_count:.0f} NCCL timeout(s) in {hours}", nccl)
    if hot_readings >= rules.temperature_suspect:
        return found(
            "suspect", "temperature-high", f"{hot_readings} readings in a row over {rules.temperature_limit_c:g} C", hot
        )
    if gaps:
        return found(
            "suspect",
            "heartbeat-missed",
            f"a heartbeat gap of {max(e.value or 0 for e in gaps):.0f} s (limit {rules.heartbeat_suspect_s:.0f} s)",
            gaps,
        )
    if len(failures) >= rules.failures_suspect:
        return found(
            "suspect",
            "failures-attributed",
            f"{len(failures)} failures in {hours} of tests that passed on other nodes ({_test_list(failures)})",
            failures,
        )
    if slow.level == "suspect":
        return found("suspect", "throughput-slow", f"slower than other nodes: {slow.describe()}", kept)
    return Assessment("healthy", None, "no evidence against it in the window", (), slow)


def _xid_list(xids: Sequence[NodeEvidence]) -> str:
    return ", ".join(f"XID {int(e.value or 0)} at {e.time:%m-%d %H:%M}" for e in xids[-4:])


def _test_list(failures: Sequence[NodeEvidence]) -> str:
    tests = sorted({e.test_id or "?" for e in failures})
    return ", ".join(tests[:3]) + (f" and {len(tests) - 3} more" if len(tests) > 3 else "")


def _signal_list(signals: Sequence[NodeEvidence]) -> str:
    kinds = sorted({e.kind for e in signals})
    return " and ".join(f"{sum(e.kind == k for e in signals)} {k.replace('_', ' ')} signal(s)" for k in kinds)
