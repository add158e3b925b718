"""Kubernetes Leases (coordination.k8s.io/v1) and LeaseCandidates."""
