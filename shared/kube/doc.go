// Package kube is Dovetail's Kubernetes edge: informers that watch the cluster and build
// events.Snapshot values from their caches (Watcher, SnapshotBuilder), and the Applier that turns
// commands into Kubernetes API calls (Eviction API, taints, NodeClaim create/delete, the
// unavailable-offerings ConfigMap). It is the only shared package that imports client-go; the pure
// core (scheduling, provisioning, disruption) never does.
package kube
