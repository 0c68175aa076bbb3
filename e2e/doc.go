// Package e2e is the end-to-end suite against a real control plane: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler v1.34.2 on loopback (package realcluster; binaries
// from `make controlplane`), kwok playing the kubelets, and all of Dovetail as local dev mode runs
// it (embedded NATS JetStream, the agent under its least-privilege RBAC, the provision function,
// the fake cloud registering booted instances as Nodes).
//
// The tests carry the build tag e2e, so `go test ./...` (make test) does not need the binaries;
// `make e2e` builds them and runs `go test -tags e2e ./e2e/...`. The suite lives in the main module
// because it drives localdev, the agent and the shared packages directly; only the control-plane
// binaries, which import k8s.io/kubernetes, are a separate module (e2e/controlplane).
package e2e
