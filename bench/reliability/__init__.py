"""The reliability harness: apimw's guarantees under load and faults, as figures.

    python -m bench.reliability            # every scenario, full size; writes docs/reliability.md
    python -m bench.reliability --quick    # the short versions (what the test suite runs)
    python -m bench.reliability --only exactly_once,lost_update

Each scenario is a module here (see ``_harness`` for the interface).  The run writes
``docs/reliability/results.json``, one PNG per plot under ``docs/reliability/``, and
``docs/reliability.md`` (the table of every figure, with the command and the machine).
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
