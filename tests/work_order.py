"""The order xdist hands out work units: the longest first.

With ``--dist loadgroup`` each work unit (an xdist group, or a lone test) goes
to the next free worker in the order of the collection.  A long unit handed out
last keeps one worker busy while the others have finished, so the units are
sorted by their expected time, longest first (``longest_first``), and xdist's
own reordering by test count is switched off (``pytest_configure`` in
``tests/conftest.py``).  ``SLOWEST`` holds the wall seconds of the slowest tests
(setup included) from a whole run on a quiet 2-core machine with 3 workers; any
other test counts as one second.  A stale or missing entry only costs a less
even spread, never a test.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

_DEFAULT_S = 1.0

SLOWEST: dict[str, float] = {
    "tests/test_readme_tour.py::test_readme_tour_runs_as_pasted": 62.0,
    "tests/test_notebooks.py::test_notebook_runs_top_to_bottom[01_quickstart.ipynb]": 35.0,
    "tests/test_notebooks.py::test_notebook_runs_top_to_bottom[02_streaming_pipeline.ipynb]": 35.0,
    "tests/test_notebooks.py::test_notebook_runs_top_to_bottom[03_operations.ipynb]": 25.0,
    "tests/broker_api/test_openapi_contract.py::test_schemathesis_with_every_check_finds_nothing": 40.0,
    "tests/broker_api/test_openapi_contract.py::test_schemathesis_as_an_authenticated_user_finds_nothing": 28.0,
    "tests/broker_api/test_openapi_contract.py::test_schemathesis_finds_nothing_in_the_namesrv_document": 20.0,
    "tests/broker_api/test_fuzz.py::test_fuzzed_requests_never_get_a_500_and_every_4xx_is_a_json_error": 33.0,
    "tests/test_bench_cli.py::test_the_broker_benchmark_measures_next_to_its_peers_skips_a_missing_redis_and_leaves_"
    "nothing_running": 36.0,
    "tests/test_bench_cli.py::test_quick_run_prints_table_writes_json_and_rewrites_only_the_readme_block": 30.0,
    "tests/connectors/test_delta_spark.py::test_snapshot_fallback_reads_the_same_rows_and_stays_pinned_until_re_"
    "registered": 35.0,
    "tests/connectors/test_delta_spark.py::test_spark_sql_over_the_live_mirror_sees_new_rows_without_re_registering": 34.0,
    "tests/connectors/test_delta_spark.py::test_read_stream_of_the_mirror_table_yields_only_new_messages_each_run": 33.0,
    "tests/connectors/test_delta_spark.py::test_a_session_without_the_jars_falls_back_to_the_snapshot": 32.0,
    "tests/connectors/test_delta_spark.py::test_a_stale_local_maven_entry_does_not_break_the_delta_session": 23.0,
    "tests/connectors/test_delta_spark.py::test_time_travel_by_version_on_both_paths": 16.0,
    "tests/streaming/test_sparkmq_election.py::test_source_and_sink_follow_an_elected_master_with_no_duplicates_and_no_"
    "gaps": 30.0,
    "tests/broker_api/test_table_topics.py::test_spark_reads_a_typed_upsert_table_and_its_change_feed": 26.0,
    "tests/broker_api/test_table_topics.py::test_spark_without_delta_reads_a_partitioned_table_snapshot": 21.0,
    "tests/test_docs_site.py::test_page_runs_as_pasted[guides/pop-delay-transactions.md]": 25.0,
    "tests/test_docs_site.py::test_generated_reference_pages_are_current_and_a_stale_one_is_reported": 20.0,
    "tests/kafka/test_cli_tools.py::test_console_producer_consumer_and_consumer_groups_tool": 22.0,
    "tests/kafka/test_cli_tools.py::test_topics_tool_creates_lists_describes_and_grows_a_topic": 13.0,
    "tests/broker_api/test_busy_clients.py::test_python_client_and_spark_client_wait_out_busy_answers": 20.0,
    "tests/streaming/test_sparkmq_kafka.py::test_kafka_guide_examples_read_and_write_with_only_format_and_connection_"
    "changed": 19.0,
    "tests/streaming/test_sparkmq_kafka.py::test_more_kafka_guide_examples_pattern_assign_and_kafka_rows_into_the_"
    "sink": 18.0,
    "tests/broker_api/test_auth.py::test_spark_batch_read_with_token_and_hmac": 18.0,
    "tests/streaming/test_sparkmq_outage.py::test_a_killed_broker_stops_its_queues_only_and_resumes_exactly_once": 18.0,
    "tests/broker_api/test_controller_etcd.py::test_a_controller_of_three_etcd_members_loses_the_leader_under_load_"
    "and_still_elects": 18.0,
    "tests/broker_api/test_delay.py::test_timer_messages_survive_sigkill_and_are_delivered_once": 17.0,
    "tests/connectors/test_mirror_process.py::test_sigkill_of_the_mirror_child_mid_write_resumes_with_no_duplicate_"
    "and_no_gap": 17.0,
    "tests/streaming/test_sparkmq_damaged.py::test_a_query_fails_naming_the_damaged_record": 17.0,
    "tests/broker_api/test_cli.py::test_errors_are_one_unwrapped_line_on_stderr": 17.0,
    "tests/store/test_index.py::test_every_inserted_key_is_found": 15.0,
}


def _expected_s(item: pytest.Item) -> float:
    return SLOWEST.get(item.nodeid.split("@", 1)[0], _DEFAULT_S)


def longest_first(items: list[pytest.Item], unit_of: Callable[[pytest.Item], str]) -> None:
    """Sort ``items`` in place by their work unit's expected seconds, longest first; the tests of
    one unit keep their order, and units of equal time keep the collection's."""
    cost: dict[str, float] = {}
    first: dict[str, int] = {}
    for i, item in enumerate(items):
        unit = unit_of(item)
        cost[unit] = cost.get(unit, 0.0) + _expected_s(item)
        first.setdefault(unit, i)
    order = {item.nodeid: i for i, item in enumerate(items)}
    items.sort(key=lambda item: (-cost[unit_of(item)], first[unit_of(item)], order[item.nodeid]))
