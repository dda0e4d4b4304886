"""Which tests ``make test-fast`` leaves out, beside the ones marked ``slow`` in place.

The inner loop's tier must finish in under a minute on a 2-core machine, so the tests that cost
seconds each (measured with ``--durations``; a line's figure is both databases together, under
load) are marked ``slow`` here, in one list, rather than by a decorator in each file: the list
is what a person re-measures and edits, and ``tests/test_suite_layout.py`` fails a name here
that no longer names a test. Each area keeps quicker tests in the fast tier (backend
conformance, worker, CLI in-process, cron, scheduler, payloads, outage, prefetch, results).
``make test`` runs everything.
"""

from __future__ import annotations

import pytest

SLOW_DIRS = {
    "tests/dashboard/": "a real browser (Debian's chromium) and a served dashboard",
    "tests/model/": "the semantics state machine and its findings, both databases (~40 s)",
}

SERIAL_MODULES = {
    "tests/test_outage.py": "restarts the shared PostgreSQL server",
    "tests/test_soak.py": "restarts the shared PostgreSQL server",
}
"""Slow tests that must run alone: ``make test`` runs the rest of the slow tier in three
pytest-xdist processes, then these one at a time (marked ``serial`` here)."""

SLOW_MODULES = {
    "tests/test_pgbouncer.py": "starts a real PgBouncer (15 s)",
    "tests/test_properties.py": "hypothesis runs over both databases (17 s)",
    "tests/test_records.py": "the real CLI in subprocesses (9 s)",
    "tests/test_orphans.py": "real supervisors SIGKILLed, their children waited for (20 s)",
    "tests/test_dead_workers.py": "real workers killed and frozen past a 10 s limit (90 s)",
    "tests/test_supervisor_restarts.py": "real supervisors restarting children (40-65 s)",
    "tests/test_key_turns_cli.py": "the real CLI worker in a subprocess (6 s)",
    "tests/test_storage_holds.py": "the real CLI's stats in subprocesses, own databases (15 s)",
}

SLOW_TESTS = {
    "tests/test_clusters.py": {
        "test_the_extra_cluster_stops_and_starts_again": "pg_createcluster, a stop, a start (6 s)",
        "test_a_cluster_is_dropped_whole_on_the_way_out": "pg_createcluster, pg_dropcluster (5 s)",
    },
    "tests/backends/test_storage.py": {
        "test_a_reader_holding_on_stops_new_generations_at_the_cap": "16 s",
    },
    "tests/backends/test_lock_order.py": {
        "test_a_burst_of_opposite_orders_never_deadlocks": "6.6 s",
    },
    "tests/test_readers.py": {
        "test_a_read_behind_a_held_lock_fails_in_two_seconds_saying_so": "4.0 s",
    },
    "tests/test_queue_ops.py": {
        "test_sixteen_processes_racing_one_key_create_one_job": "45 s",
        "test_rate_limit_spaces_starts": "5.6 s",
        "test_pausing_a_queue_and_a_task": "4.1 s",
        "test_max_running_holds_across_workers": "3.3 s",
    },
    "tests/test_schema_guard.py": {
        "test_parallel_migrations_into_a_new_schema_all_succeed": "22 s",
        "test_a_bad_url_is_reported_without_its_password": "21 s",
        "test_producers_and_migrate_refuse_a_newer_schema": "4.7 s",
    },
    "tests/test_worker.py": {
        "test_an_outcome_waiting_to_be_written_keeps_its_lease": "9.7 s",
        "test_enqueue_many_inserts_every_job": "7 s",
        "test_a_task_blocking_the_loop_is_named_with_the_lease_it_endangers": "3.1 s",
        "test_a_second_stop_abandons_unwritable_outcomes_at_once": "2.6 s",
        "test_a_stop_ends_within_the_grace_even_when_outcomes_cannot_be_written": "2.1 s",
    },
    "tests/backends/test_bulk_insert.py": {
        "test_enqueue_many_is_one_transaction_however_large": "9.6 s",
    },
    "tests/test_cron.py": {
        "test_next_fires_increase_strictly_and_match": "8 s (hypothesis)",
    },
    "tests/test_outage_recovery.py": {
        "test_claims_resume_within_two_seconds_of_the_database_answering": "5.4 s",
        "test_outcomes_waiting_for_the_database_join_the_one_outage_line": "4 s",
    },
    "tests/test_prefetch.py": {
        "test_long_jobs_are_not_claimed_ahead_by_default": "5 s",
        "test_short_jobs_are_claimed_ahead_up_to_the_concurrency": "4.7 s",
    },
    "tests/test_scheduler.py": {
        "test_worker_runs_the_scheduler_and_a_periodic_task_fires": "4.7 s",
        "test_a_dying_scheduler_stops_the_worker": "4.6 s",
        "test_five_schedulers_racing_enqueue_each_slot_once": "3.9 s",
    },
    "tests/test_examples.py": {
        "test_each_guide_example_runs_and_prints_what_it_promises": "2-10 s each (a subprocess)",
        "test_make_demo_runs_every_feature_and_ends_by_itself": "5 s (a subprocess)",
        "test_ctrl_c_stops_the_demo_cleanly": "2 s (a subprocess)",
    },
    "tests/test_cli_control_chars.py": {
        "test_no_listing_prints_a_stored_values_control_characters": "25-40 s (14 CLI runs)",
    },
    "tests/test_fastapi.py": {
        "test_a_rolled_back_request_enqueues_nothing": "4.2 s",
    },
    "tests/test_progress.py": {
        "test_many_calls_cost_at_most_a_beat_a_second": "3.3 s",
    },
    "tests/test_cli_options.py": {
        "test_a_bad_value_names_the_flag": "2.7 s (CLI subprocesses)",
    },
    "tests/backends/test_operations.py": {
        "test_error_filter_matches_decoded_messages_case_insensitively": "2.7 s",
    },
    "tests/test_workflow_limits.py": {
        "test_a_sweep_item_the_database_refuses_is_logged_and_the_worker_goes_on": "1.9 s",
    },
    "tests/test_results.py": {
        "test_a_result_that_cannot_be_stored_kills_the_job_not_the_worker": "2.4 s",
        "test_a_populated_version_5_database_upgrades_and_runs_its_jobs": "1.9 s",
    },
    "tests/test_hostile.py": {
        "test_a_poison_row_is_dead_and_the_worker_goes_on": "2.3 s",
    },
    "tests/test_waiting.py": {
        "test_two_thousand_handles_awaited_together": "2.2 s",
    },
    "tests/backends/test_registry.py": {
        "test_an_sqlite_app_never_imports_the_postgres_driver": "2.2 s (a subprocess)",
    },
    "tests/test_row_growth.py": {
        "test_the_wal_of_a_signal_loop_is_the_same_for_each_signal": "2.4 s quiet, 1,000 signals",
        "test_a_big_result_to_many_children_is_stored_once": "2.7 s quiet, 300 children",
    },
    "tests/test_ids_never_reused.py": {
        "test_a_rollback_in_another_process_is_not_reused_here_after_a_restart": "2.9 s",
        "test_an_enqueue_in_another_process_after_the_rollback_gets_a_new_id": "2 s",
    },
}


def mark_slow(items: list[pytest.Item]) -> None:
    """Add the ``slow`` marker to every collected test the lists above name (all parameters),
    and ``serial`` (with ``slow``) to the modules that must run alone."""
    for item in items:
        path, _, name = item.nodeid.partition("::")
        if path in SERIAL_MODULES:
            item.add_marker(pytest.mark.serial)
            item.add_marker(pytest.mark.slow)
        in_slow_dir = any(path.startswith(d) for d in SLOW_DIRS)
        if in_slow_dir or path in SLOW_MODULES or name.split("[", 1)[0] in SLOW_TESTS.get(path, {}):
            item.add_marker(pytest.mark.slow)
