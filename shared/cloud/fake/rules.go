package fake

import (
	"time"

	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
	"github.com/dovetail-dev/dovetail/shared/cloud"
	"github.com/dovetail-dev/dovetail/shared/cloud/aws/ec2class"
)

var _ cloud.NodeClassRules = (*Cloud)(nil)

// RecordLaunch records what drift compares (ec2class.Rules.RecordLaunch).
func (c *Cloud) RecordLaunch(nc *apisv1.NodeClaim, class apisv1.NodeClass, inst *cloud.Instance) {
	ec2class.Rules{}.RecordLaunch(nc, class, inst)
}

// IsDrifted is the EC2NodeClass drift rule (ec2class.Rules.IsDrifted): the fake serves
// EC2NodeClasses and decides drift as the AWS provider does.
func (c *Cloud) IsDrifted(nc *apisv1.NodeClaim, node *corev1.Node, class apisv1.NodeClass) cloud.Drift {
	return ec2class.Rules{}.IsDrifted(nc, node, class)
}

// ReservationExpiring is the capacity block expiry rule (ec2class.Rules.ReservationExpiring).
func (c *Cloud) ReservationExpiring(nc *apisv1.NodeClaim, class apisv1.NodeClass, now time.Time) (time.Time, bool) {
	return ec2class.Rules{}.ReservationExpiring(nc, class, now)
}
