"""``fastci qualify``: run the qualification set on a bundle, print the verdicts, publish the results."""

from __future__ import annotations

import argparse
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastci.cli.base import PathArgument, UsageError, console, kafka_settings, out, uses_data_dir

PRECISIONS = ("bf16", "fp8")


def register(commands: Any) -> None:
    qualify = commands.add_parser(
        "qualify",
        help="run the model qualification set on a stack bundle (emulated accelerator) and publish results",
        description="Each model: an inference check against its pinned golden (with repeats: same bits expected), "
        "a short training run (loss curve in the reference's band, eval >= 99%% of the reference) and the runtime's "
        "throughput samples. The bundle comes from --bundle, $FASTCI_BUNDLE_FILE or $FASTCI_BUNDLE_*; without one, "
        "the newest healthy emulated stack.",
    )
    qualify.add_argument("--model", action="append", help="a model of the set (repeatable; default all four)")
    qualify.add_argument(
        "--precision", action="append", choices=PRECISIONS, help="kernel precision (repeatable; default bf16 and fp8)"
    )
    qualify.add_argument("--backend", choices=("emulated", "reference"), default="emulated")
    qualify.add_argument("--bundle", type=PathArgument("file"), help="bundle file (TOML); default $FASTCI_BUNDLE_FILE")
    qualify.add_argument(
        "--inject", metavar="DEFECT", help="swap in the layer version that introduces DEFECT (see --list-defects)"
    )
    qualify.add_argument(
        "--baseline",
        metavar="FILE|healthy",
        help="also run this bundle interleaved step by step and gate throughput against it",
    )
    qualify.add_argument("--trigger", choices=("presubmit", "nightly", "release", "bisect", "dev", "rerun"))
    qualify.add_argument("--run-id", help="run id of the results (default: a new one)")
    qualify.add_argument("--kafka", action="store_true", help="publish to Kafka instead of the embedded log")
    qualify.add_argument("--no-publish", action="store_true", help="print the verdicts only")
    qualify.add_argument("--list-defects", action="store_true", help="list the emulated stack's defects and exit")
    qualify.add_argument(
        "--write-golden",
        action="store_true",
        help="retrain the models on the reference backend and pin their goldens (after a model change)",
    )
    qualify.set_defaults(func=cmd_qualify)
    uses_data_dir(qualify, "write")


def cmd_qualify(args: argparse.Namespace) -> int:
    from fastci.inputs import Bundle
    from fastci.producer.context import ContextError, load_bundle, load_context
    from fastci.qualify import runner, stack
    from fastci.qualify.models import FAMILIES

    if args.list_defects:
        for defect, where in stack.DEFECTS.items():
            out.print(f"{defect:36s} {where}", highlight=False)
        return 0
    models = args.model or list(FAMILIES)
    for name in models:
        if name not in FAMILIES:
            raise UsageError(f"--model: {name!r} is not in the qualification set ({', '.join(FAMILIES)})")
    if args.write_golden:
        for name in models:
            pinned = runner.write_golden(FAMILIES[name])
            console.print(f"pinned {name}: {pinned.steps} steps, eval {pinned.eval_score:.4f}", highlight=False)
        return 0
    try:
        context = load_context(
            args.bundle,
            trigger=args.trigger,
            defaults={"bundle": stack.HEALTHY, "hardware_revision": "emulated-rev-a"},
        )
        if args.inject:
            context = context.model_copy(update={"bundle": stack.with_defect(args.inject, context.bundle)})
        baseline_bundle: Bundle | None = None
        if args.baseline == "healthy":
            baseline_bundle = stack.HEALTHY
        elif args.baseline:
            baseline_bundle = load_bundle(args.baseline)
        precisions = args.precision or list(PRECISIONS)
        if args.backend == "reference":
            precisions = ["fp32"]
        backends = [(p, runner.make_backend(args.backend, context.bundle, p)) for p in precisions]  # type: ignore[arg-type]
    except (ContextError, ValueError) as error:
        raise UsageError(str(error)) from None

    qualifications = []
    for precision, backend in backends:
        baseline = (
            runner.make_backend("emulated", baseline_bundle, precision)
            if baseline_bundle and precision != "fp32"
            else None
        )  # type: ignore[arg-type]
        console.print(
            f"qualifying on {runner.describe(backend)}"
            + (f", baseline {runner.describe(baseline)}" if baseline else ""),
            highlight=False,
        )
        qualifications.append(
            runner.qualify(
                backend, models, baseline, progress=lambda f: console.print(f"  {f.name} done", highlight=False)
            )
        )
    _print_verdicts(qualifications, out)
    seconds = sum(q.seconds for q in qualifications)
    failing = [
        (q, m)
        for q in qualifications
        for m in q.models
        if {m.inference.status, m.training.status, m.training.performance_status} != {"passed"}
    ]
    console.print(
        f"{sum(len(q.models) for q in qualifications)} model run(s) in {seconds:.1f} s; "
        f"{len(failing)} with a failed or flaky check",
        highlight=False,
    )
    if not args.no_publish:
        _publish(args, qualifications, context)
    return 1 if failing else 0


def _print_verdicts(qualifications: list, to: Any) -> None:
    from rich.table import Table

    table = Table("model", "prec.", "inference", "training", "throughput", title="qualification")
    for q in qualifications:
        for m in q.models:
            t = m.training
            table.add_row(
                m.family.name,
                q.precision,
                f"{_mark(m.inference.status)} {m.inference.summary()}",
                f"{_mark(t.status)} {t.summary()}",
                f"{_mark(t.performance_status)} {t.performance_summary()}",
            )
    to.print(table)


def _mark(status: str) -> str:
    return {"passed": "[green]passed[/green]", "failed": "[red]FAILED[/red]", "flaky": "[yellow]FLAKY[/yellow]"}[status]


def _publish(args: argparse.Namespace, qualifications: list, context: Any) -> None:
    from fastci.producer.client import Producer
    from fastci.producer.spool import Spool
    from fastci.producer.targets import EmbeddedTarget, KafkaTarget
    from fastci.qualify.results import to_results

    run_id = args.run_id or f"qualify-{datetime.now(UTC):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}"
    now = datetime.now(UTC)
    if args.kafka:
        settings = kafka_settings(args)
        target = KafkaTarget(settings)
        spool_dir = Path(args.data_dir) / "spool" / "kafka" / (settings.namespace.rstrip("-") or "default")
    else:
        target, spool_dir = EmbeddedTarget(args.data_dir), Path(args.data_dir) / "spool" / "embedded"
    producer = Producer(target, Spool(spool_dir), context)
    events = [e for q in qualifications for e in to_results(q, context, run_id, now)]
    for event in events:
        producer.publish(event)
    report = producer.close()
    if report.error:
        console.print(
            f"[yellow]{len(events)} result(s) of run {run_id} spooled in {spool_dir}:[/yellow] {report.error} "
            f"(send them later: fastci spool drain{' --kafka' if args.kafka else ''})",
            highlight=False,
        )
    else:
        console.print(f"published {len(events)} result(s) of run {run_id} to {target.description}", highlight=False)
