package kube

import (
	corev1 "k8s.io/api/core/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

// commitments reads the cluster's commitments from the ConfigMap apisv1.CommitmentsConfigMap in
// the agent's namespace (key apisv1.CommitmentsKey). No ConfigMap: nil (every offering at list
// price). A ConfigMap without the key, or whose YAML is invalid, is logged with the field and
// the reason and also gives nil, so a bad edit falls back to list prices instead of planning on
// half a commitment.
func (b *SnapshotBuilder) commitments(st stores) *apisv1.Commitments {
	if st.commitments == nil {
		return nil
	}
	obj, ok, _ := st.commitments.GetByKey(b.namespace + "/" + apisv1.CommitmentsConfigMap)
	if !ok {
		return nil
	}
	cm, _ := obj.(*corev1.ConfigMap)
	if cm == nil {
		return nil
	}
	c, err := apisv1.CommitmentsFromConfigMap(cm)
	if err != nil {
		b.log().Error("ignoring the commitments ConfigMap: every offering is priced at list", "configMap", b.namespace+"/"+apisv1.CommitmentsConfigMap, "err", err)
		return nil
	}
	return c
}
