"""What vgate reads from the cluster: a Kubernetes client and a cache of the kinds its rules need."""
