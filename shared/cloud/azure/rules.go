package azure

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/azure/aksclass"
)

// Rules are the provider's AKSNodeClass rules (aksclass.Rules with its kubelet identity), which
// the drift function and the launch step ask through cloud.NodeClassRules.
func (p *Provider) Rules() aksclass.Rules {
	return aksclass.Rules{KubeletIdentityClientID: p.o.Bootstrap.KubeletIdentityClientID}
}

var _ cloud.NodeClassRules = (*Provider)(nil)

// RecordLaunch records what drift compares (aksclass.Rules.RecordLaunch).
func (p *Provider) RecordLaunch(nc *apisv1.NodeClaim, class apisv1.NodeClass, inst *cloud.Instance) {
	p.Rules().RecordLaunch(nc, class, inst)
}

// IsDrifted is the AKSNodeClass drift rule (aksclass.Rules.IsDrifted), as the Azure provider's
// CloudProvider.IsDrifted.
func (p *Provider) IsDrifted(nc *apisv1.NodeClaim, node *corev1.Node, class apisv1.NodeClass) cloud.Drift {
	return p.Rules().IsDrifted(nc, node, class)
}

// ReservationExpiring is false (aksclass.Rules.ReservationExpiring).
func (p *Provider) ReservationExpiring(nc *apisv1.NodeClaim, class apisv1.NodeClass, now time.Time) (time.Time, bool) {
	return p.Rules().ReservationExpiring(nc, class, now)
}
