"""The metrics, as pure DataFrame -> DataFrame functions (no I/O, no awsglue).

Pipeline: ``raw`` (the archive read with ``schema.spark_schema()`` plus its file path) ->
``normalize`` (typed columns, a ``malformed`` reason, ``late``) -> ``deduplicate`` (one row per
record) -> ``grain`` (the finest aggregate; checkpointed by the caller) -> the tables. Every
table is grouped by broker first (``BROKER``): from a grain partitioned that way, none needs a
shuffle.

Decisions, so that a reader of the tables knows what a number means:

- A record is malformed when its line is not JSON or has a mistyped value, its ``v`` is not 1,
  its ``kind`` is unknown, a required field is missing or a timestamp does not parse. Malformed
  records are counted (by reason) and otherwise skipped.
- Duplicates (same kind, namespace, broker, event id and source, trigger and attempt) count once;
  the copy with the earliest ``at`` is kept. Rejections carry no event id and are never merged.
- A record belongs to the hour of its ``at`` (UTC), whatever file it came in: a late record (one
  found under an hour prefix after its own) lands in its own hour.
- ``delivered`` counts successful attempts, replies included (a reply is a delivery answered with
  an event); ``replies`` is that subset. Latency is ``at - arrival`` (knativearrivaltime) of the
  successful attempt, in ms; percentiles are exact (``percentile``, linear interpolation): both
  stamps have millisecond precision, so the exact aggregate keeps one counter per distinct
  millisecond value, which stays small, and the figures are reproducible by hand.
- Hourly tables are dense: every broker (trigger) has a row for every hour from its first to its
  last hour in the data, zeros where there was no traffic, so charts and sums read no gaps.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from spark_glue.schema import BY_KIND, CORRUPT_COLUMN, EVENT, KINDS, OUTCOMES, SCHEMA_VERSION

# Outcomes travel as small integers through the deduplication so that it stays a hash aggregate
# (string buffers would force Spark into a sort-based aggregate).
OUTCOME_CODE = {name: i for i, name in enumerate(OUTCOMES)}
_SUCCESS = (OUTCOME_CODE["delivered"], OUTCOME_CODE["reply"])
_PATH_HOUR = r"^\d{4}/\d{2}/\d{2}/\d{2}$"
BROKER = ["namespace", "broker"]
PERCENTILES = (0.5, 0.95, 0.99)


def normalize(raw: DataFrame) -> DataFrame:
    """One narrow row per line: typed, flat columns, ``malformed`` (a reason, or null) and
    ``late`` (0 or 1).

    ``raw`` has the columns of ``schema.spark_schema()`` and ``path`` (the file it came from), and
    may have ``filed`` (see ``_late``)."""
    kind = F.col("kind")
    accepted, delivery = kind == "accepted", kind == "delivery"
    # Both timestamps are parsed once, in a projection of their own: the optimizer keeps it apart
    # (a parse is not cheap enough to repeat), so the expressions below reuse the parsed values.
    parsed = raw.select(
        "*",
        _timestamp(F.col("at")).alias("at_ts"),
        F.when(delivery, _timestamp(F.col("arrival"))).alias("arrival_ts"),
    )
    at, arrival = F.col("at_ts"), F.col("arrival_ts")
    late = _late(raw, at)
    return parsed.select(
        kind.alias("kind"),
        F.col("namespace"),
        F.col("broker"),
        at.alias("at"),
        F.when(accepted, F.col("event.id")).otherwise(F.col("event_id")).alias("event_id"),
        F.when(accepted, F.col("event.type")).otherwise(F.col("event_type")).alias("event_type"),
        F.when(accepted, F.col("event.source"))
        .otherwise(F.col("event_source"))
        .alias("event_source"),
        F.when(accepted, F.col("event.datacontenttype")).alias("datacontenttype"),
        F.when(delivery, F.col("trigger")).alias("trigger"),
        F.when(delivery, F.col("attempt")).alias("attempt"),
        F.col("status"),
        F.col("reason"),
        _outcome_code(F.col("outcome")).alias("outcome"),
        F.col("latency_ms"),
        F.when(delivery, (F.unix_micros(at) - F.unix_micros(arrival)) / 1000.0).alias("e2e_ms"),
        F.col("size"),
        F.when(accepted, F.size("triggers")).alias("matched_triggers"),
        _malformed_reason(at, arrival).alias("malformed"),
        F.coalesce(late, F.lit(False)).cast("int").alias("late"),
    )


# What makes two lines the same record. Rejections carry no event id and are never merged.
DEDUP_KEY = ["kind", "namespace", "broker", "event_id", "event_source", "event_type",
             "datacontenttype", "trigger", "attempt", "reason"]  # fmt: skip
_KEPT = ("status", "outcome", "latency_ms", "e2e_ms", "size", "matched_triggers")


def deduplicate(lines: DataFrame) -> DataFrame:
    """One row per record, with ``copies`` (how many lines carried it) and ``late`` (how many of
    them were late); malformed lines collapse to one row per reason; then ``hour``, ``date`` and
    ``cell`` (see ``by_cell``)."""
    grouped = (
        by_cell(lines)
        .groupBy("cell", *DEDUP_KEY, "uid", "malformed")
        .agg(
            F.min("at").alias("at"),
            *(F.min_by(c, "at").alias(c) for c in _KEPT),
            F.count(F.lit(1)).alias("copies"),
            F.sum("late").alias("late"),
        )
    )
    return grouped.drop("uid", "event_id").select(
        "*",
        F.date_trunc("hour", "at").alias("hour"),
        F.to_date("at").alias("date"),
    )


def by_cell(lines: DataFrame) -> DataFrame:
    """The key and kept values of each line, with ``cell``, shuffled by ``cell``: the one shuffle
    of the lines.

    ``cell`` is a hash of the grain's text dimensions, all of them parts of the record's key, so
    every copy of a record and every record of a grain cell meet in one partition, and both
    ``deduplicate``'s grouping and ``grain``'s (which include ``cell``) run there without another
    shuffle. Rejections carry no event id: each gets a ``uid`` of its own, so none is merged."""
    valid = F.col("malformed").isNull()
    kind = F.when(valid, F.col("kind"))
    accepted = kind == "accepted"
    keyed = lines.select(
        *(F.when(valid, F.col(c)).alias(c) for c in DEDUP_KEY),
        F.when(kind == "rejected", F.monotonically_increasing_id()).alias("uid"),
        "malformed",
        "at",
        *_KEPT,
        "late",
    )
    cell = F.xxhash64(
        "kind", "malformed", "namespace", "broker", F.when(accepted, F.col("event_type")),
        F.when(accepted, F.col("event_source")), "datacontenttype", "reason", "trigger",
    )  # fmt: skip
    return keyed.withColumn("cell", cell).repartition("cell")


def grain(clean: DataFrame) -> DataFrame:
    """The finest aggregate every table is cut from, so the records are scanned once: per kind (or
    malformed reason), broker and hour, and per the dimensions of that kind (type and source of
    accepted events; reason and status of rejections; trigger, outcome, status and, for successful
    attempts, the latency in ms of deliveries), the counts and sums the tables need. Latencies are
    whole milliseconds, so a trigger-hour holds one row per distinct value, and exact percentiles
    come from these (value, count) pairs. ``cell`` (from ``deduplicate``) is grouped on too, as
    the records are partitioned by it; it adds no group."""
    kind = F.col("kind")
    accepted, delivery = kind == "accepted", kind == "delivery"
    success = delivery & F.col("outcome").isin(*_SUCCESS)
    return (
        clean.groupBy(
            "cell",
            kind.alias("kind"),
            "malformed",
            "namespace",
            "broker",
            "hour",
            F.when(accepted, F.col("event_type")).alias("event_type"),
            F.when(accepted, F.col("event_source")).alias("event_source"),
            "datacontenttype",
            "reason",
            F.when(kind != "accepted", F.col("status")).alias("status"),
            "trigger",
            F.when(delivery, F.col("outcome")).alias("outcome"),
            F.when(success, F.round("e2e_ms", 3)).alias("e2e_ms"),
        )
        .agg(
            F.count(F.lit(1)).alias("records"),
            F.sum("copies").alias("lines"),
            F.sum("late").alias("late"),
            F.count(F.when(F.col("matched_triggers") > 0, 1)).alias("matched"),
            F.sum("matched_triggers").alias("trigger_matches"),
            F.sum("size").alias("bytes"),
            F.sum("latency_ms").alias("attempt_ms"),
            F.min("at").alias("first_seen"),
            F.max("at").alias("last_seen"),
        )
        .drop("cell")
    )


def broker_hourly(grain: DataFrame) -> DataFrame:
    """Per broker and hour: accepted, rejected, matched (events routed to ≥ 1 trigger), no_match,
    trigger_matches (the fan-out: sum of matched triggers) and accepted_bytes."""
    rows = _valid(grain).where(F.col("kind").isin("accepted", "rejected"))
    accepted = F.col("kind") == "accepted"
    counts = rows.groupBy(*BROKER, "hour").agg(
        _sum_when(accepted, "records").alias("accepted"),
        _sum_when(~accepted, "records").alias("rejected"),
        _sum_when(accepted, "matched").alias("matched"),
        _sum_when(accepted, F.col("records") - F.col("matched")).alias("no_match"),
        _sum_when(accepted, "trigger_matches").alias("trigger_matches"),
        _sum_when(accepted, "bytes").alias("accepted_bytes"),
    )
    return _dense(counts, BROKER)


def broker_rejections(grain: DataFrame) -> DataFrame:
    """Per broker, hour, reason and status: rejected requests."""
    return (
        _valid(grain)
        .where(F.col("kind") == "rejected")
        .groupBy("namespace", "broker", "hour", "reason", "status")
        .agg(F.sum("records").alias("rejected"))
        .withColumn("date", F.to_date("hour"))
    )


def broker_event_types(grain: DataFrame) -> DataFrame:
    """Per broker, hour, event type and source: accepted events."""
    return (
        _accepted(grain)
        .groupBy("namespace", "broker", "hour", "event_type", "event_source")
        .agg(F.sum("records").alias("events"))
        .withColumn("date", F.to_date("hour"))
    )


EVENT_TYPE_KEYS = ["namespace", "broker", "event_type", "event_source", "datacontenttype"]


def event_types(grain: DataFrame) -> DataFrame:
    """Per broker, event type, source and content type, per date: first_seen, last_seen, events.
    Per date keeps incremental (Glue bookmark) runs exact; ``rollup_event_types`` sums dates."""
    return (
        _accepted(grain)
        .withColumn("date", F.to_date("hour"))
        .groupBy(*EVENT_TYPE_KEYS, "date")
        .agg(
            F.min("first_seen").alias("first_seen"),
            F.max("last_seen").alias("last_seen"),
            F.sum("records").alias("events"),
        )
    )


def rollup_event_types(table: DataFrame) -> DataFrame:
    """The ``event_types`` table over all its dates: what the registry lists per broker."""
    return table.groupBy(*EVENT_TYPE_KEYS).agg(
        F.min("first_seen").alias("first_seen"),
        F.max("last_seen").alias("last_seen"),
        F.sum("events").alias("events"),
    )


def trigger_hourly(grain: DataFrame) -> DataFrame:
    """Per trigger and hour: attempts, delivered (replies included), replies, retries,
    dead_lettered, transport_errors (no status), latency p50/p95/p99 (ms, arrival to success) and
    the mean duration of one attempt."""
    return _dense(trigger_figures(grain, ["hour"]), [*BROKER, "trigger"])


def trigger_figures(grain: DataFrame, by: list[str]) -> DataFrame:
    """The delivery figures per trigger and ``by`` (e.g. ``["hour"]``, or ``[]`` for the whole
    window)."""
    outcome = F.col("outcome")
    success = outcome.isin(*_SUCCESS)
    pct = F.percentile(F.col("e2e_ms"), F.array(*(F.lit(p) for p in PERCENTILES)), F.col("records"))
    return (
        _valid(grain)
        .where(F.col("kind") == "delivery")
        .groupBy("namespace", "broker", "trigger", *by)
        .agg(
            F.sum("records").alias("attempts"),
            _sum_when(success, "records").alias("delivered"),
            _sum_when(outcome == OUTCOME_CODE["reply"], "records").alias("replies"),
            _sum_when(outcome == OUTCOME_CODE["retry"], "records").alias("retries"),
            _sum_when(outcome == OUTCOME_CODE["dead_lettered"], "records").alias("dead_lettered"),
            _sum_when(F.col("status").isNull(), "records").alias("transport_errors"),
            pct.alias("pct"),
            (F.sum("attempt_ms") / F.sum("records")).alias("attempt_ms_avg"),
        )
        .select(
            "*",
            *(
                F.col("pct")[i].alias(f"latency_p{round(p * 100)}_ms")
                for i, p in enumerate(PERCENTILES)
            ),
        )
        .drop("pct")
    )


def delivery_totals(grain: DataFrame) -> DataFrame:
    """The delivery figures over every trigger (one row, ``trigger`` null)."""
    everything = _valid(grain).withColumn("namespace", F.lit(None).cast("string"))
    return trigger_figures(
        everything.withColumn("broker", F.col("namespace")).withColumn(
            "trigger", F.col("namespace")
        ),
        [],
    )


def quality(grain: DataFrame) -> DataFrame:
    """One row per kind (valid records) or malformed reason: lines read, records kept,
    duplicates, late lines, first and last ``at``."""
    return grain.groupBy("kind", "malformed").agg(
        F.sum("lines").alias("lines"),
        F.sum(F.when(F.col("malformed").isNull(), F.col("records")).otherwise(0)).alias("records"),
        F.sum(F.when(F.col("malformed").isNull(), F.col("lines") - F.col("records"))).alias(
            "duplicates"
        ),
        F.sum("late").alias("late"),
        F.min("first_seen").alias("first_seen"),
        F.max("last_seen").alias("last_seen"),
    )


def _valid(grain: DataFrame) -> DataFrame:
    return grain.where(F.col("malformed").isNull())


def _sum_when(condition: Column, value: str | Column) -> Column:
    column = F.col(value) if isinstance(value, str) else value
    return F.coalesce(F.sum(F.when(condition, column)), F.lit(0))


def _accepted(grain: DataFrame) -> DataFrame:
    return _valid(grain).where(F.col("kind") == "accepted")


def _dense(counts: DataFrame, keys: list[str]) -> DataFrame:
    """Fill the hours with no traffic between each key's first and last hour with zero counts.

    One grouping per key gathers its hours into a map and walks the hour sequence through it: no
    join (and, on a grain partitioned by broker, no shuffle)."""
    measures = [c for c in counts.columns if c not in (*keys, "hour")]
    spans = counts.groupBy(*keys).agg(
        F.map_from_entries(F.collect_list(F.struct("hour", F.struct(*measures)))).alias("by_hour"),
        F.min("hour").alias("first"),
        F.max("hour").alias("last"),
    )
    hour = F.explode(F.sequence("first", "last", F.expr("INTERVAL 1 HOUR"))).alias("hour")
    filled = (
        spans.select(*keys, "by_hour", hour)
        .select(*keys, "hour", F.element_at("by_hour", F.col("hour")).alias("m"))
        .select(*keys, "hour", *(F.col(f"m.{c}").alias(c) for c in measures))
    )
    zeros: dict[str, bool | float | int | str] = {
        f.name: 0
        for f in counts.schema.fields
        if f.name in measures and f.dataType.typeName() in ("long", "integer")
    }
    return filled.fillna(zeros).withColumn("date", F.to_date("hour"))


# The hour a line's file is filed under (the ``YYYY/MM/DD/HH`` prefix of its key), when the reader
# knows it: ``pipeline.with_filed_hours`` parses it once per file and joins it on.
FILED = "filed"


def _late(raw: DataFrame, at: Column) -> Column:
    """Whether a line's ``at`` falls before the hour its file is filed under. With ``filed`` that
    is one comparison per line; a line without it (a frame built by hand, a path the reader's
    table does not spell the same way) compares the same text of both hours, cut from its ``at``
    and its path with string functions per line (twice the cost)."""
    path_hour = F.substring(F.substring_index("path", "/", -5), 1, 13)
    at_hour = F.when(
        F.col("at").endswith("Z"), F.translate(F.substring("at", 1, 13), "-T", "//")
    ).otherwise(F.date_format(at, "yyyy/MM/dd/HH"))
    by_path = path_hour.rlike(_PATH_HOUR) & (at_hour < path_hour)
    if FILED not in raw.columns:
        return by_path
    return F.coalesce(at < F.col(FILED), by_path)


def _outcome_code(outcome: Column) -> Column:
    code = F.lit(None).cast("int")
    for name, value in OUTCOME_CODE.items():
        code = F.when(outcome == name, F.lit(value)).otherwise(code)
    return code


# The archive writer's shape (``archive.rfc3339``): UTC with milliseconds.
WRITER_TIMESTAMP = "yyyy-MM-dd'T'HH:mm:ss.SSSX"


def _timestamp(text: Column) -> Column:
    """An RFC 3339 string as a timestamp. The writer's shape is parsed with its fixed pattern
    (about twice as fast as a cast, which first works out which of its many forms it holds).
    Any other text (no fraction, more digits, an offset, stray spaces...) fails the pattern,
    gives null, and takes the general cast. The pattern is strict (``configure`` sets the
    CORRECTED parser policy), so where it does parse it gives the cast's instant."""
    # The pattern's letters match either case ('t', 'z'), which the cast refuses: both upper-case
    # letters are required first (two scans of a short text, no copies).
    writer = text.endswith("Z") & text.contains("T")
    return F.coalesce(
        F.when(writer, F.to_timestamp(text, WRITER_TIMESTAMP)), text.cast("timestamp")
    )


def _malformed_reason(at: Column, arrival: Column) -> Column:
    """The first thing wrong with a line, or null when it is a valid v1 record."""
    kind = F.col("kind")

    def missing(kind_name: str) -> Column:
        cols = [F.col(f.name) for f in BY_KIND[kind_name] if not f.nullable]
        if kind_name == "accepted":
            cols += [F.col(f"event.{e.name}") for e in EVENT if not e.nullable]
        any_null = F.lit(False)
        for c in cols:
            any_null = any_null | c.isNull()
        return (kind == kind_name) & any_null

    common_missing = F.col("at").isNull() | F.col("namespace").isNull() | F.col("broker").isNull()
    return (
        F.when(F.col(CORRUPT_COLUMN).isNotNull(), F.lit("unparsable"))
        .when(F.col("v").isNull() | (F.col("v") != SCHEMA_VERSION), F.lit("unknown_version"))
        .when(~kind.isin(*KINDS) | kind.isNull(), F.lit("unknown_kind"))
        .when(
            common_missing
            | missing("accepted")
            | missing("rejected")
            | missing("delivery")
            | missing("duplicate"),
            F.lit("missing_field"),
        )
        .when(at.isNull() | ((kind == "delivery") & arrival.isNull()), F.lit("bad_timestamp"))
        .when(
            (kind == "delivery") & F.col("outcome").isin(*OUTCOMES).__invert__(), F.lit("bad_value")
        )
        .when((kind == "delivery") & (F.col("attempt") < 1), F.lit("bad_value"))
    )
