"""The reliability harness: apimw's guarantees under load and faults, as figures.

    python -m bench.reliability            # every scenario, full size; writes build/reliability/
    python -m bench.reliability --quick    # the short versions (what the test suite runs)
    python -m bench.reliability --only exactly_once,lost_update
    python -m bench.reliability --publish  # overwrite the committed docs/example/reliability.md

Each scenario is a module here (see ``_harness`` for the interface).  The run writes
``reliability/results.json``, one PNG per plot under ``reliability/``, and
``reliability.md`` (the table of every figure, with the command and the machine) into
``build/reliability/`` (``--out DIR`` elsewhere); only ``--publish`` writes them into
``docs/``, over the committed report.
It exits 1 if any scenario's guarantee did not hold.
"""

#: the scenarios, in the order they run and appear in the report
SCENARIOS = (
    "exactly_once",
    "lost_update",
    "store_outage",
    "worker_kill",
    "db_restart",
    "hostile_input",
    "soak",
)
