"""Source offsets: ``{topic: {partition: next_offset}}`` with string partition keys (JSON)."""

from __future__ import annotations

import json
from collections.abc import Mapping

from recovery_lib.io.exceptions import InvalidSourceOption

# Spark's own Kafka connector uses the same sentinels in startingOffsets JSON.
EARLIEST = -2
LATEST = -1

Offsets = dict[str, dict[str, int]]


def normalize(offsets: Mapping[str, Mapping[str | int, int]]) -> Offsets:
    return {t: {str(p): int(o) for p, o in parts.items()} for t, parts in offsets.items()}


def parse_starting_offsets(value: str, topics: list[str]) -> str | Offsets:
    """``earliest``, ``latest`` or JSON ``{"topic": {"0": 42, "1": -2}}``."""
    text = value.strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidSourceOption(
            f"startingOffsets is neither 'earliest', 'latest' nor valid JSON ({exc.msg} at "
            f'char {exc.pos}); example: {{"{topics[0] if topics else "topic"}": {{"0": 0}}}}'
        ) from exc
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        raise InvalidSourceOption(
            'startingOffsets JSON must map topic -> {partition: offset}, e.g. {"t": {"0": 5}}'
        )
    unknown = sorted(set(parsed) - set(topics))
    if unknown:
        raise InvalidSourceOption(
            f"startingOffsets names topics {unknown} that are not subscribed ({topics}); "
            "add them to 'subscribe' or remove them"
        )
    try:
        result = normalize(parsed)
    except (TypeError, ValueError) as exc:
        raise InvalidSourceOption(
            f"startingOffsets offsets must be integers (-2 earliest, -1 latest): {exc}"
        ) from exc
    for topic, parts in result.items():
        for part, off in parts.items():
            if not part.isdigit() or off < LATEST - 1:
                raise InvalidSourceOption(
                    f"startingOffsets[{topic!r}][{part!r}] = {off} is invalid; partitions are "
                    "non-negative integers, offsets >= 0 or -2 (earliest) / -1 (latest)"
                )
    return result


def parse_ending_offsets(value: str | None, topics: list[str]) -> Offsets | None:
    """``endingOffsets``: JSON ``{"topic": {"0": 42}}``; the source never reads past it (a
    bounded run, e.g. a reference run up to where a live job has committed). Topics not
    subscribed by this source are ignored, so one snapshot of a job's offsets serves all of
    its sources; partitions not named are unbounded."""
    if value is None or not value.strip():
        return None
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError as exc:
        raise InvalidSourceOption(
            f"endingOffsets is not valid JSON ({exc.msg} at char {exc.pos}); "
            'example: {"bids": {"0": 1200, "1": 1180}}'
        ) from exc
    if not isinstance(parsed, dict) or not all(isinstance(v, dict) for v in parsed.values()):
        raise InvalidSourceOption("endingOffsets must map topic -> {partition: offset}")
    try:
        return normalize({t: parts for t, parts in parsed.items() if t in topics})
    except (TypeError, ValueError) as exc:
        raise InvalidSourceOption(f"endingOffsets: {exc}") from exc
