//go:build tools

// The Karpenter side runs Karpenter's kwok controller, built from this module's requirement
// (make scale: go build sigs.k8s.io/karpenter/kwok); this import keeps its packages in go.mod.
package main

import _ "sigs.k8s.io/karpenter/kwok"
