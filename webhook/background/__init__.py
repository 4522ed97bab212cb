"""The background audit: what already runs in the cluster, judged against today's policies, off the
admission path (`vgate audit scan`, once or watching)."""
