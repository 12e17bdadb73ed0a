"""``fastci pool``: a CI driver's clock and the pool's configuration, as a user drives them."""

from __future__ import annotations

import orjson

from fastci.cli.main import main
from fastci.runtime.embedded import DataDir
from fastci.topology import decode


def fastci(tmp_path, *args: str) -> int:
    return main(["--data-dir", str(tmp_path), *args])


def test_tick_and_configure_publish_what_the_scheduler_reads(tmp_path, capsys):
    assert fastci(tmp_path, "pool", "tick", "--at", "2026-12-01T02:00:00+01:00") == 0
    assert fastci(tmp_path, "pool", "configure", "--show-default") == 0
    config = orjson.loads(capsys.readouterr().out)
    config.update(version="small", nodes=config["nodes"][:4])
    path = tmp_path / "pool.json"
    path.write_bytes(orjson.dumps(config))
    assert fastci(tmp_path, "pool", "configure", str(path)) == 0
    assert "4 nodes, 32 chips" in capsys.readouterr().err
    log = DataDir(tmp_path).log
    (tick,) = [decode("clock", r.payload) for r in log.topic("clock").read()]
    assert tick.time.isoformat() == "2026-12-01T01:00:00+00:00"
    (published,) = [decode("pool-config", r.payload) for r in log.topic("pool-config").read()]
    assert published.version == "small" and len(published.nodes) == 4
    assert fastci(tmp_path, "run") == 0  # the scheduler takes both


def test_mistakes_are_named(tmp_path, capsys):
    assert fastci(tmp_path, "pool", "tick", "--at", "2026-12-01 02:00") == 2
    assert "field 'time'" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_bytes(
        orjson.dumps({"version": "v", "nodes": [{"node_id": "a", "hardware_revision": "r", "chips": 8}], "classes": []})
    )
    assert fastci(tmp_path, "pool", "configure", str(bad)) == 2
    assert "field 'classes'" in capsys.readouterr().err
    assert fastci(tmp_path, "pool", "configure") == 2
