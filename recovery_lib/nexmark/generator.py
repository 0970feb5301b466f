"""Deterministic NexMark events: every field of event ``i`` is a pure function of (seed, i).

Random draws are counter-based (splitmix64 of seed, event id and field number) and computed
for blocks of events at once with numpy, so the same seed and event range give byte-identical
JSON, whatever the block size, rate or process. Ingest time is not part of the bytes: it is
the Kafka record timestamp set when the event is produced.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from recovery_lib.nexmark.config import (
    AUCTION_ID_LEAD,
    AUCTION_PROPORTION,
    FIRST_AUCTION_ID,
    FIRST_CATEGORY_ID,
    FIRST_PERSON_ID,
    HOT_GROUP,
    NUM_CATEGORIES,
    PERSON_ID_LEAD,
    PERSON_PROPORTION,
    TOTAL_PROPORTION,
    GeneratorConfig,
)

FIRST_NAMES = [
    "Peter",
    "Paul",
    "Luke",
    "John",
    "Saul",
    "Vicky",
    "Kate",
    "Julie",
    "Sarah",
    "Deiter",
    "Walter",
]
LAST_NAMES = [
    "Shultz",
    "Abrams",
    "Spencer",
    "White",
    "Bartels",
    "Walton",
    "Smith",
    "Jones",
    "Noris",
]
CITIES = [
    "Phoenix",
    "Los Angeles",
    "San Francisco",
    "Boise",
    "Portland",
    "Bend",
    "Redmond",
    "Seattle",
    "Kent",
    "Cheyenne",
]
STATES = ["AZ", "CA", "ID", "OR", "WA", "WY"]
CHANNELS = ["Google", "Facebook", "Baidu", "Apple"]

PERSON, AUCTION, BID = 0, 1, 2
KIND_NAMES = {PERSON: "person", AUCTION: "auction", BID: "bid"}

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_FIELDS = 32  # distinct draw streams per event


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finalizer (wrapping uint64 arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * _M1
    x = (x ^ (x >> np.uint64(27))) * _M2
    return x ^ (x >> np.uint64(31))


class Draws:
    """Counter-based random draws: field ``f`` of event ``i`` is a pure function of (seed, i, f),
    so any range of events can be re-generated without the ones before it."""

    def __init__(self, seed: int, event_ids: np.ndarray) -> None:
        with np.errstate(over="ignore"):
            seed_term = np.uint64(seed & 0xFFFFFFFF) * _GOLDEN
            self._base = event_ids.astype(np.uint64) * np.uint64(_FIELDS) + seed_term

    def raw(self, field: int) -> np.ndarray:
        with np.errstate(over="ignore"):
            return _mix(self._base + np.uint64(field) * _GOLDEN)

    def below(self, field: int, n: np.ndarray | int, sel: np.ndarray | None = None) -> np.ndarray:
        """Integers in [0, n) (n may be an array aligned with ``sel``)."""
        raw = self.raw(field) if sel is None else self.raw(field)[sel]
        return (raw % np.asarray(n, dtype=np.uint64)).astype(np.int64)

    def uniform(self, field: int, sel: np.ndarray | None = None) -> np.ndarray:
        raw = self.raw(field) if sel is None else self.raw(field)[sel]
        return (raw >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


def last_base0_person_id(event_ids: np.ndarray) -> np.ndarray:
    epoch, offset = np.divmod(event_ids, TOTAL_PROPORTION)
    return epoch * PERSON_PROPORTION + np.minimum(offset, PERSON_PROPORTION - 1)


def last_base0_auction_id(event_ids: np.ndarray) -> np.ndarray:
    """Id (base 0) of the newest auction at this event, as in Beam's AuctionGenerator."""
    epoch, offset = np.divmod(event_ids, TOTAL_PROPORTION)
    before_auctions = offset < PERSON_PROPORTION  # a person: last auction of the previous epoch
    in_bids = offset >= PERSON_PROPORTION + AUCTION_PROPORTION  # a bid: last auction of this epoch
    epoch = np.where(before_auctions, epoch - 1, epoch)
    offset = np.where(before_auctions | in_bids, AUCTION_PROPORTION - 1, offset - PERSON_PROPORTION)
    return epoch * AUCTION_PROPORTION + offset


def _prices(u: np.ndarray) -> np.ndarray:
    return np.round(np.power(10.0, u * 6.0) * 100.0).astype(np.int64)


@dataclass
class EventBlock:
    """Columns of a contiguous range of events; the per-kind arrays are in event-id order."""

    event_ids: np.ndarray
    kinds: np.ndarray
    event_time_ms: np.ndarray
    persons: dict[str, np.ndarray]
    auctions: dict[str, np.ndarray]
    bids: dict[str, np.ndarray]


class NexmarkGenerator:
    def __init__(self, config: GeneratorConfig | None = None) -> None:
        self.config = config or GeneratorConfig()

    def block(self, start: int, count: int) -> EventBlock:
        cfg = self.config
        ids = np.arange(start, start + count, dtype=np.int64)
        d = Draws(cfg.seed, ids)
        rem = ids % TOTAL_PROPORTION
        kinds = np.where(
            rem < PERSON_PROPORTION,
            PERSON,
            np.where(rem < PERSON_PROPORTION + AUCTION_PROPORTION, AUCTION, BID),
        )
        times = cfg.base_time_ms + (ids * (1000.0 / cfg.event_time_rate)).astype(np.int64)
        delayed = d.uniform(0) < cfg.delay_probability
        times = np.where(delayed, times - d.below(1, max(cfg.max_delay_ms, 1)), times)

        last_person = last_base0_person_id(ids)
        last_auction = last_base0_auction_id(ids)

        def next_person(field: int, sel: np.ndarray) -> np.ndarray:
            num_people = last_person[sel] + 1
            active = np.minimum(num_people, cfg.num_active_people)
            return num_people - active + d.below(field, active + PERSON_ID_LEAD, sel)

        def next_auction(field: int, sel: np.ndarray) -> np.ndarray:
            max_a = last_auction[sel]
            min_a = np.maximum(max_a - cfg.num_in_flight_auctions, 0)
            return min_a + d.below(field, max_a - min_a + 1 + AUCTION_ID_LEAD, sel)

        def hot(field: int, sel: np.ndarray) -> np.ndarray:
            return d.uniform(field, sel) < cfg.hot_ratio

        p = kinds == PERSON
        persons = {
            "event_id": ids[p],
            "id": last_person[p] + FIRST_PERSON_ID,
            "first": d.below(2, len(FIRST_NAMES))[p],
            "last": d.below(3, len(LAST_NAMES))[p],
            "city": d.below(4, len(CITIES))[p],
            "state": d.below(5, len(STATES))[p],
            "card": d.below(6, 10**16)[p],
            "dateTime": times[p],
        }
        a = kinds == AUCTION
        initial = _prices(d.uniform(7))[a]
        seller = np.where(hot(8, a), (last_person[a] // HOT_GROUP) * HOT_GROUP, next_person(9, a))
        auctions = {
            "event_id": ids[a],
            "id": last_auction[a] + FIRST_AUCTION_ID,
            "item": d.below(10, 100_000)[a],
            "initialBid": initial,
            "reserve": initial + _prices(d.uniform(11))[a],
            "dateTime": times[a],
            "expires": times[a] + 1000 + d.below(12, 19_000)[a],
            "seller": seller + FIRST_PERSON_ID,
            "category": FIRST_CATEGORY_ID + d.below(13, NUM_CATEGORIES)[a],
        }
        b = kinds == BID
        auction = np.where(
            hot(14, b), (last_auction[b] // HOT_GROUP) * HOT_GROUP, next_auction(15, b)
        )
        bidder = np.where(
            hot(16, b), (last_person[b] // HOT_GROUP) * HOT_GROUP + 1, next_person(17, b)
        )
        bids = {
            "event_id": ids[b],
            "auction": auction + FIRST_AUCTION_ID,
            "bidder": bidder + FIRST_PERSON_ID,
            "price": _prices(d.uniform(18))[b],
            "channel": d.below(19, len(CHANNELS))[b],
            "dateTime": times[b],
        }
        return EventBlock(ids, kinds, times, persons, auctions, bids)

    def encode(self, block: EventBlock) -> list[tuple[int, int, bytes, bytes, int]]:
        """(event id, kind, key, JSON value, partition) in event-id order."""
        parts = self.config.partitions
        out: list[tuple[int, int, bytes, bytes, int]] = []
        ps = block.persons
        for eid, pid, fi, li, ci, si, card, ts in zip(
            *(
                ps[k].tolist()
                for k in ("event_id", "id", "first", "last", "city", "state", "card", "dateTime")
            ),
            strict=True,
        ):
            first, last = FIRST_NAMES[fi], LAST_NAMES[li]
            c = f"{card:016d}"
            value = (
                f'{{"id":{pid},"name":"{first} {last}",'
                f'"emailAddress":"{first.lower()}.{last.lower()}'
                f'{pid}@example.com","creditCard":"{c[0:4]} {c[4:8]} {c[8:12]} {c[12:16]}",'
                f'"city":"{CITIES[ci]}","state":"{STATES[si]}","dateTime":{ts}}}'
            )
            out.append((eid, PERSON, str(pid).encode(), value.encode(), pid % parts))
        au = block.auctions
        for eid, aid, item, init, res, ts, exp, sel, cat in zip(
            *(
                au[k].tolist()
                for k in (
                    "event_id",
                    "id",
                    "item",
                    "initialBid",
                    "reserve",
                    "dateTime",
                    "expires",
                    "seller",
                    "category",
                )
            ),
            strict=True,
        ):
            value = (
                f'{{"id":{aid},"itemName":"item-{item}",'
                f'"description":"lot {item} of auction {aid}",'
                f'"initialBid":{init},"reserve":{res},"dateTime":{ts},"expires":{exp},'
                f'"seller":{sel},"category":{cat}}}'
            )
            out.append((eid, AUCTION, str(aid).encode(), value.encode(), aid % parts))
        bi = block.bids
        for eid, auc, bidder, price, ch, ts in zip(
            *(
                bi[k].tolist()
                for k in ("event_id", "auction", "bidder", "price", "channel", "dateTime")
            ),
            strict=True,
        ):
            channel = CHANNELS[ch]
            value = (
                f'{{"auction":{auc},"bidder":{bidder},"price":{price},"channel":"{channel}",'
                f'"url":"https://www.nexmark.com/{channel.lower()}/item.htm?query={auc}",'
                f'"dateTime":{ts}}}'
            )
            out.append((eid, BID, str(auc).encode(), value.encode(), auc % parts))
        out.sort(key=lambda row: row[0])
        return out
