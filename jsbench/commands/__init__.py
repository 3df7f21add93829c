"""What the `jsbench` commands do, one module per command or group (train, eval, estimators, schedules,
policies); jsbench/cli.py declares their options and calls them. Each takes the parsed options and the rich
consoles of stdout (`out`) and stderr (`err`) and returns its exit code; a refusal is a `JsbenchError`."""
