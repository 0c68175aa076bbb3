package v1

import (
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeClassTravelsAsItsObject(t *testing.T) {
	ec2 := NodeClass{EC2: &EC2NodeClass{TypeMeta: metav1.TypeMeta{APIVersion: AWSGroupVersion, Kind: KindEC2NodeClass},
		ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: EC2NodeClassSpec{Tags: map[string]string{"team": "a"}}}}
	aks := NodeClass{AKS: &AKSNodeClass{TypeMeta: metav1.TypeMeta{APIVersion: AzureGroupVersion, Kind: KindAKSNodeClass},
		ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: AKSNodeClassSpec{Tags: map[string]string{"team": "b"}}}}
	for _, nc := range []NodeClass{ec2, aks} {
		b, err := json.Marshal([]NodeClass{nc})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), `"kind":"`+nc.Kind()+`"`) || strings.Contains(string(b), `"EC2"`) || strings.Contains(string(b), `"AKS"`) {
			t.Errorf("wire form %s: want the object itself", b)
		}
		var back []NodeClass
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if len(back) != 1 || back[0].Kind() != nc.Kind() || back[0].Name() != "default" || back[0].Tags()["team"] != nc.Tags()["team"] {
			t.Errorf("%s did not round-trip: %+v", nc.Kind(), back)
		}
	}
	// Snapshot schema 1 carried EC2NodeClasses without a kind.
	var old NodeClass
	if err := json.Unmarshal([]byte(`{"metadata":{"name":"legacy"},"spec":{}}`), &old); err != nil || old.EC2 == nil || old.Name() != "legacy" {
		t.Errorf("kind-less object: %v, %+v; want an EC2NodeClass", err, old)
	}
	var bad NodeClass
	if err := json.Unmarshal([]byte(`{"kind":"GCENodeClass","metadata":{"name":"x"}}`), &bad); err == nil || !strings.Contains(err.Error(), `kind "GCENodeClass"`) {
		t.Errorf("unknown kind: err %v", err)
	}
	if b, _ := json.Marshal(NodeClass{}); string(b) != "null" || !(NodeClass{}).IsZero() {
		t.Errorf("zero NodeClass marshals as %s", b)
	}
}

func TestFindNodeClassMatchesKindAndName(t *testing.T) {
	classes := []NodeClass{
		{AKS: &AKSNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}},
		{EC2: &EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}}},
	}
	if got := FindNodeClass(classes, &NodeClassReference{Group: AWSGroup, Kind: KindEC2NodeClass, Name: "default"}); got.EC2 == nil {
		t.Errorf("EC2 ref found %s", got.Kind())
	}
	if got := FindNodeClass(classes, &NodeClassReference{Group: AzureGroup, Kind: KindAKSNodeClass, Name: "default"}); got.AKS == nil {
		t.Errorf("AKS ref found %s", got.Kind())
	}
	if got := FindNodeClass(classes, &NodeClassReference{Kind: KindEC2NodeClass, Group: AzureGroup, Name: "default"}); !got.IsZero() {
		t.Errorf("a ref whose group and kind disagree found %s", got.Kind())
	}
	if got := FindNodeClass(classes, nil); !got.IsZero() {
		t.Error("nil ref found a NodeClass")
	}
	c := classes[1].DeepCopy()
	c.EC2.Name = "changed"
	if classes[1].Name() != "default" {
		t.Error("DeepCopy shares the object")
	}
}

// Objects from typed informers (and built in code) carry no TypeMeta: an AKSNodeClass so made
// must still travel as an AKSNodeClass (it came back an EC2NodeClass, and the lifecycle's
// AKSNodeClass status was lost: TestAzurePreemptionScenario launched nothing).
func TestKindlessNodeClassTravelsAsItsKind(t *testing.T) {
	for _, nc := range []NodeClass{
		{AKS: &AKSNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "aks"}}},
		{EC2: &EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "ec2"}}},
	} {
		b, err := json.Marshal(nc)
		if err != nil {
			t.Fatal(err)
		}
		var back NodeClass
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if (nc.AKS != nil) != (back.AKS != nil) || (nc.EC2 != nil) != (back.EC2 != nil) || back.Name() != nc.Name() {
			t.Errorf("%s came back as %s (%s)", nc.Name(), back.Kind(), b)
		}
		if nc.Meta().GetName() != nc.Name() || (nc.AKS != nil && nc.AKS.Kind != "") || (nc.EC2 != nil && nc.EC2.Kind != "") {
			t.Errorf("MarshalJSON changed its receiver: %+v", nc)
		}
	}
}
