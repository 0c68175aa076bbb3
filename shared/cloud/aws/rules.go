package aws

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/aws/ec2class"
)

var _ cloud.NodeClassRules = (*Provider)(nil)

// RecordLaunch records what drift compares (ec2class.Rules.RecordLaunch).
func (p *Provider) RecordLaunch(nc *apisv1.NodeClaim, class apisv1.NodeClass, inst *cloud.Instance) {
	ec2class.Rules{}.RecordLaunch(nc, class, inst)
}

// IsDrifted is the EC2NodeClass drift rule (ec2class.Rules.IsDrifted), as
// karpenter-provider-aws's CloudProvider.IsDrifted.
func (p *Provider) IsDrifted(nc *apisv1.NodeClaim, node *corev1.Node, class apisv1.NodeClass) cloud.Drift {
	return ec2class.Rules{}.IsDrifted(nc, node, class)
}

// ReservationExpiring is the capacity block expiry rule (ec2class.Rules.ReservationExpiring).
func (p *Provider) ReservationExpiring(nc *apisv1.NodeClaim, class apisv1.NodeClass, now time.Time) (time.Time, bool) {
	return ec2class.Rules{}.ReservationExpiring(nc, class, now)
}
