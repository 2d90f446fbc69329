"""RunStatus: the exit handler; a report for every run, failed ones included."""
