"""``recovery topics create|delete|list``: topic administration (kafka/admin.py)."""

from __future__ import annotations

import typer

from recovery_lib.cli.output import abort, console
from recovery_lib.kafka.exceptions import KafkaLayerError

topics_app = typer.Typer(help="Topic administration.", no_args_is_help=True)


@topics_app.command("create")
def topics_create(name: str, partitions: int = typer.Option(1, min=1)) -> None:
    from recovery_lib.kafka.admin import TopicAdmin

    try:
        created = TopicAdmin().create(name, partitions)
    except KafkaLayerError as exc:
        abort(exc)
        return
    console.print(
        f"created {name} ({partitions} partitions)" if created else f"{name} already exists"
    )


@topics_app.command("delete")
def topics_delete(name: str) -> None:
    from recovery_lib.kafka.admin import TopicAdmin

    try:
        deleted = TopicAdmin().delete(name)
    except KafkaLayerError as exc:
        abort(exc)
        return
    console.print(f"deleted {name}" if deleted else f"{name} does not exist")


@topics_app.command("list")
def topics_list() -> None:
    from recovery_lib.kafka.admin import TopicAdmin

    try:
        for name in TopicAdmin().list():
            console.print(name)
    except KafkaLayerError as exc:
        abort(exc)
