"""Running phases: session, runner, sweep, the stall watchdog, the supervisor, the output directory, the phase generators and the checkpoint run."""
