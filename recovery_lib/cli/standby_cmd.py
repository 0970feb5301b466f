"""``recovery standby ship|status``: state shipping into a standby directory and its lag
(standby/shipping.py, ops/shipping.py)."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import typer

from recovery_lib.cli.output import abort, console

standby_app = typer.Typer(
    help="Standby jobs: state shipping and its lag (recovery_lib/ha/standby).", no_args_is_help=True
)


@standby_app.command("ship")
def standby_ship(
    name: str = typer.Argument(None, help="A configured job with `mode: standby`."),
    checkpoint: str = typer.Option(None, help="Or: a query checkpoint directory to ship ..."),
    to: str = typer.Option(None, help="... into this standby directory."),
) -> None:
    """One state-shipping round: a new checksummed copy if the primary committed since the
    last one (what the state_shipping DAG runs)."""
    from recovery_lib.ha.standby.shipping import Shipper
    from recovery_lib.ops.shipping import NoStandby, ship_job

    if name:
        try:
            result = ship_job(name)
        except (NoStandby, ValueError) as exc:
            abort(exc)
            return
    elif checkpoint and to:
        if not Path(checkpoint, "offsets").is_dir():
            abort(ValueError(f"{checkpoint} is not a Spark query checkpoint (no offsets/ in it)"))
            return
        shipper = Shipper(checkpoint, to)
        shipped = shipper.ship()
        result = {
            "shipped": asdict(shipped) if shipped else None,
            "lag": asdict(shipper.lag()),
        }
    else:
        abort(ValueError("name a configured job, or give both --checkpoint and --to"))
        return
    console.print_json(json.dumps(result, default=str))


@standby_app.command("status")
def standby_status(
    name: str = typer.Argument(None, help="A configured job with `mode: standby`."),
    checkpoint: str = typer.Option(None, help="Or: the primary's query checkpoint ..."),
    to: str = typer.Option(None, help="... and the standby directory."),
) -> None:
    """The standby's copies (verified), the newest usable one and the lag behind the primary."""
    from recovery_lib.ha.standby.shipping import Shipper, latest_complete
    from recovery_lib.ops.shipping import NoStandby, shipper_for

    try:
        shipper = shipper_for(name) if name else Shipper(checkpoint, to)
    except (NoStandby, ValueError, TypeError) as exc:
        abort(
            exc if not isinstance(exc, TypeError) else ValueError("name a job or --checkpoint/--to")
        )
        return
    rejected: list = []
    usable = latest_complete(shipper.dir, verify=True, rejected=rejected)
    console.print_json(
        json.dumps(
            {
                "usable_copy": {"seq": usable.seq, "batch": usable.batch, "bytes": usable.bytes}
                if usable
                else None,
                "rejected_copies": [{"seq": s, "problems": p[:5]} for s, p in rejected],
                "lag": asdict(shipper.lag()),
            }
        )
    )
