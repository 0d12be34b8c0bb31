"""Real workloads in: readers of public cluster traces and Kubernetes objects into one
per-job table (`clusteremu.cluster.traces.table`), one module per format (docs/traces.md)."""
