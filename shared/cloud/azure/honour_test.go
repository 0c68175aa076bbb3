package azure_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dovetail-dev/dovetail/shared/apis"
	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure"
)

// TestUnhonouredFieldsAreRefused: a field the provider cannot carry to the node is
// ValidationSucceeded=False (reason NotSupported) naming the field, and Create refuses the
// class; the CRD's defaults (what the node image does anyway) and the fields that reach the VM
// are validated True.
func TestUnhonouredFieldsAreRefused(t *testing.T) {
	w := newWorld(t, "prod")
	p := newProviderWith(t, w, func(o *azure.Options) { o.KubernetesVersion = "1.33.2" })
	static, none, enabled := apisv1.CPUManagerPolicyStatic, apisv1.GPUModeNone, true
	swap := "2Gi"
	cases := []struct {
		name   string
		edit   func(*apisv1.AKSNodeClass)
		fields []string // "" when honoured
	}{
		{"defaults and VM fields", func(nc *apisv1.AKSNodeClass) {
			nc.Spec.Kubelet, nc.Spec.GPU = &apisv1.AKSKubeletConfiguration{}, &apisv1.AKSGPU{}
			off := false
			nc.Spec.Security = &apisv1.AKSSecurity{EncryptionAtHost: &enabled, TrustedLaunch: &apisv1.AKSTrustedLaunch{SecureBoot: &off, VTPM: &off}}
			nc.Spec.LocalDNS = &apisv1.AKSLocalDNS{Mode: apisv1.LocalDNSModeDisabled}
			apis.SetAKSNodeClassDefaults(nc)
		}, nil},
		// The bootstrap contract carries cpuManagerPolicy (--cpu-manager-policy): honoured.
		{"cpu manager static", func(nc *apisv1.AKSNodeClass) {
			nc.Spec.Kubelet = &apisv1.AKSKubeletConfiguration{CPUManagerPolicy: &static}
			apis.SetAKSNodeClassDefaults(nc)
		}, nil},
		{"fail swap on", func(nc *apisv1.AKSNodeClass) {
			no := false
			nc.Spec.Kubelet = &apisv1.AKSKubeletConfiguration{FailSwapOn: &no}
			apis.SetAKSNodeClassDefaults(nc)
		}, []string{"spec.kubelet.failSwapOn"}},
		{"gpu mode None and a swap file", func(nc *apisv1.AKSNodeClass) {
			nc.Spec.GPU = &apisv1.AKSGPU{Mode: &none}
			nc.Spec.LinuxOSConfig = &apisv1.AKSLinuxOSConfig{SwapFileSize: &swap}
		}, []string{"spec.linuxOSConfig.swapFileSize", "spec.gpu.mode"}},
		{"trusted launch", func(nc *apisv1.AKSNodeClass) {
			nc.Spec.Security = &apisv1.AKSSecurity{TrustedLaunch: &apisv1.AKSTrustedLaunch{VTPM: &enabled}}
		}, []string{"spec.security.trustedLaunch"}},
		{"local DNS required, artifact streaming", func(nc *apisv1.AKSNodeClass) {
			nc.Spec.LocalDNS = &apisv1.AKSLocalDNS{Mode: apisv1.LocalDNSModeRequired}
			nc.Spec.ArtifactStreaming = &apisv1.AKSArtifactStreaming{Enabled: &enabled}
		}, []string{"spec.localDNS.mode", "spec.artifactStreaming.enabled"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nc := resolveWith(t, p, c.edit)
			cond := condition(nc, apisv1.ConditionValidationSucceeded)
			if len(c.fields) == 0 {
				if cond.Status != metav1.ConditionTrue {
					t.Fatalf("ValidationSucceeded %+v, want True", cond)
				}
				return
			}
			if cond.Status != metav1.ConditionFalse || cond.Reason != apisv1.ReasonNotSupported {
				t.Fatalf("ValidationSucceeded %+v, want False NotSupported", cond)
			}
			if ready := condition(nc, apisv1.ConditionReady); ready.Status != metav1.ConditionFalse {
				t.Errorf("Ready %+v, want False", ready)
			}
			req := request("prod", "default-val01", onDemand1)
			req.NodeClass = apisv1.NodeClassOf(nc)
			_, err := p.Create(context.Background(), req)
			for _, f := range c.fields {
				if !strings.Contains(cond.Message, f) {
					t.Errorf("condition message %q does not name %s", cond.Message, f)
				}
				if err == nil || !strings.Contains(err.Error(), f) {
					t.Errorf("Create: %v, want a refusal naming %s", err, f)
				}
			}
			if _, ok := w.srv.VM("aks-default-val01"); ok {
				t.Error("a VM was created for a refused class")
			}
		})
	}
}
