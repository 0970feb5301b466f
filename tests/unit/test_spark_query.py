"""A team's unchanged Spark job (recovery_lib/job/spark_query.py): its declaration, where its
Kafka reads and writes are pointed, which modes and sinks run it and what the others say to
change, and the GX suite of its id-less output. The end-to-end runs are in
tests/test_spark_job_e2e.py."""

from __future__ import annotations

import dataclasses
import sys

import pytest

from recovery_lib.errors import JobError
from recovery_lib.io.sinks.dedup_reader import SinkRecord
from recovery_lib.job.spark_query import KafkaRedirect, spark_query_job
from recovery_lib.job.spec import load_job
from recovery_lib.kafka.clients import spark_kafka_options
from recovery_lib.modes import ModeRefused, ModeRequest, get_mode
from recovery_lib.verify.expectations import output_suite, validate_output
from tests.spark_team_jobs import write_team_jobs


@pytest.fixture(scope="module")
def team(tmp_path_factory):
    root = write_team_jobs(tmp_path_factory.mktemp("team"))
    sys.path.insert(0, str(root))
    try:
        yield load_job("teamjobs.recovery:BIDS_EUR")
    finally:
        sys.path.remove(str(root))
        for name in [m for m in sys.modules if m.startswith("teamjobs")]:
            del sys.modules[name]


def test_the_declaration_names_inputs_and_says_the_job_writes_its_output_itself(team):
    assert team.ref == "teamjobs.recovery:BIDS_EUR" and team.name == "bids_eur"
    assert team.inputs == ("bids",) and team.own_sink and team.contract.deterministic


def test_a_declaration_that_names_no_function_says_how_to(team):
    with pytest.raises(JobError, match="module:function"):
        spark_query_job("teamjobs.bids_eur", name="x", inputs={"bids": "b"}, output="o")
    with pytest.raises(JobError, match="has no function 'nope'"):
        spark_query_job("teamjobs.bids_eur:nope", name="x", inputs={"bids": "b"}, output="o")


def test_reads_and_writes_go_to_the_launch_s_topics():
    client = spark_kafka_options({"bootstrap.servers": "127.0.0.1:1"})
    redirect = KafkaRedirect(
        topics={"prod.bids": "exp.bids", "prod.out": "exp.out"},
        output="exp.out",
        client=client,
        checkpoint="/ck/q",
        query_name="q",
    )
    assert redirect.subscribe("prod.bids, side.table") == "exp.bids,side.table"
    assert redirect.kafka_write({"topic": "prod.out"}) == {
        "topic": "exp.out",
        "kafka.bootstrap.servers": "127.0.0.1:1",
        "kafka.security.protocol": "PLAINTEXT",
    }
    # A write with a topic column and no option goes to the launch's topic too.
    assert redirect.kafka_write({})["topic"] == "exp.out"
    # Spark's options are case-insensitive; a read starts at the topics' start.
    read = redirect.kafka_read({"Subscribe": "prod.bids", "startingOffsets": "latest"})
    assert read["subscribe"] == "exp.bids" and read["startingOffsets"] == "earliest"
    with pytest.raises(JobError, match="subscribepattern: only subscribe"):
        redirect.kafka_read({"subscribePattern": "prod.*"})


def test_a_secured_cluster_s_settings_reach_spark_s_kafka_client():
    options = spark_kafka_options(
        {
            "bootstrap.servers": "h:9093",
            "security.protocol": "sasl_ssl",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "team",
            "sasl.password": 'p"w',
            "ssl.ca.location": "/etc/ca.pem",
        }
    )
    assert options["kafka.security.protocol"] == "SASL_SSL"
    assert options["kafka.sasl.mechanism"] == "SCRAM-SHA-512"
    assert options["kafka.sasl.jaas.config"] == (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="team" password="p\\"w";'
    )
    assert options["kafka.ssl.truststore.location"] == "/etc/ca.pem"
    assert options["kafka.ssl.truststore.type"] == "PEM"


@pytest.mark.parametrize("mode", ["native", "standby"])
def test_native_and_standby_run_it(team, mode):
    get_mode(mode).validate(ModeRequest(team))
    get_mode(mode).validate(ModeRequest(team, sink_mode="at_least_once", failures=("pause",)))


@pytest.mark.parametrize(
    ("mode", "says"),
    [
        ("causal", "an unchanged job logs nothing; run it native or standby"),
        ("cec", "needs a job whose build returns recovery_lib.cec.cec_aggregate"),
        ("kazoo", "replicas write through the project's release sink"),
        ("liverobin", "replicas write through the project's release sink"),
    ],
)
def test_the_other_modes_say_what_the_job_must_change(team, mode, says):
    with pytest.raises(ModeRefused, match=f"job bids_eur writes its output itself: .*{says}"):
        get_mode(mode).validate(ModeRequest(team, sink_mode="release"))


@pytest.mark.parametrize("sink", ["release", "two_phase", "transactional"])
def test_the_project_s_sink_modes_need_the_project_s_sink(team, sink):
    with pytest.raises(ModeRefused, match=f"sink mode {sink} needs the project's sink; use"):
        get_mode("native").validate(ModeRequest(team, sink_mode=sink))
    with pytest.raises(ModeRefused, match="a table sink needs the project's sink"):
        get_mode("native").validate(ModeRequest(team, table_sink=True))


@pytest.mark.parametrize(
    "failure", ["mid-write", "task-retry", "write-retry", "torn-write", "pause-mid-write", "poison"]
)
def test_failures_that_fire_in_the_project_s_sink_are_refused(team, failure):
    with pytest.raises(ModeRefused, match=f"{failure} fire.s. in the project's frames and sink"):
        get_mode("native").validate(ModeRequest(team, failures=(failure,)))


def test_every_hooked_failure_kind_is_known_to_need_the_project_s_code():
    from recovery_lib.experiment.runner import HOOK_FAULTS
    from recovery_lib.modes.base import PROJECT_CODE_FAILURES

    assert set(HOOK_FAULTS) <= PROJECT_CODE_FAILURES


def test_a_nondeterministic_unchanged_job_runs_native_only(team):
    from recovery_lib.verify.contract import ConsistencyContract, Fields

    contract = ConsistencyContract(deterministic=False, agreement=Fields(("auction",)))
    random = dataclasses.replace(team, contract=contract)
    get_mode("native").validate(ModeRequest(random))
    with pytest.raises(ModeRefused, match="cannot run causal .* run it in mode native"):
        get_mode("standby").validate(ModeRequest(random))


def test_a_jobs_file_entry_runs_it_with_a_standby(team, tmp_path, settings_env):
    from recovery_lib.ops.config import load_jobs

    settings_env(RECOVERY_HOME=tmp_path / "home")
    jobs = tmp_path / "jobs.yaml"
    jobs.write_text("jobs:\n  - {name: eur, job: 'teamjobs.recovery:BIDS_EUR', mode: standby}\n")
    job = load_jobs(jobs)["eur"]
    assert job.spec.own_sink and job.standby_dir is not None
    jobs.write_text("jobs:\n  - {name: eur, job: 'teamjobs.recovery:BIDS_EUR', mode: kazoo}\n")
    with pytest.raises(ValueError, match="job eur: job bids_eur writes its output itself"):
        load_jobs(jobs)


def _records(values: list[bytes]) -> list[SinkRecord]:
    return [
        SinkRecord(
            id=None, epoch=None, key=b"k", value=v, topic="t", partition=0, offset=i, headers=()
        )
        for i, v in enumerate(values)
    ]


def test_its_id_less_output_has_its_own_generic_suite():
    assert output_suite("bids_eur", lineage_ids=False) == "plain_output"
    records = _records([b'{"auction": 1, "price_eur": 9.0}', b"PLAIN TEXT"])
    plain = validate_output("bids_eur", records, False, "t", lineage_ids=False)
    assert plain.success, plain.failures
    # The suite of outputs with lineage ids says what is missing.
    with_ids = validate_output("bids_eur", records, False, "t")
    assert not with_ids.success
    assert any(f["expectation"] == "expect_column_values_to_not_be_null" for f in with_ids.failures)
