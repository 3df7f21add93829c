"""What the `jsbench` commands do, one module per command or group (train, eval, compare, estimators,
schedules, policies; common.py: pre-flight checks; tables.py: every table the terminal shows); jsbench/cli.py
declares their options and calls them. Each takes the parsed options and the rich consoles of stdout (`out`)
and stderr (`err`) and returns its exit code; a refusal is a `JsbenchError`."""
