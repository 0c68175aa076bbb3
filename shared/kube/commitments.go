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
	c, err := ParseCommitmentsConfigMap(cm)
	if err != nil {
		b.log().Error("ignoring the commitments ConfigMap: every offering is priced at list", "configMap", b.namespace+"/"+apisv1.CommitmentsConfigMap, "err", err)
		return nil
	}
	return c
}

// ParseCommitmentsConfigMap reads the commitments of a ConfigMap named
// apisv1.CommitmentsConfigMap (data key apisv1.CommitmentsKey; the agent and `dovetail plan`
// read it alike). Errors name the ConfigMap and the field.
func ParseCommitmentsConfigMap(cm *corev1.ConfigMap) (*apisv1.Commitments, error) {
	data, ok := cm.Data[apisv1.CommitmentsKey]
	if !ok {
		return nil, &commitmentsError{cm: cm.Namespace + "/" + cm.Name, msg: "data[" + apisv1.CommitmentsKey + "]: required"}
	}
	c, err := apisv1.ParseCommitments([]byte(data))
	if err != nil {
		return nil, &commitmentsError{cm: cm.Namespace + "/" + cm.Name, msg: "data[" + apisv1.CommitmentsKey + "]: " + err.Error()}
	}
	return c, nil
}

type commitmentsError struct{ cm, msg string }

func (e *commitmentsError) Error() string { return "ConfigMap " + e.cm + ": " + e.msg }
