package events

import (
	"strings"
	"testing"
)

// The discovered cluster facts cross the trust boundary like every other snapshot field: they
// round-trip through the codec, and a snapshot whose facts the API server could not have given
// (a DNS address outside the service range, a version with a flag appended) is refused naming
// the field.
func TestClusterFactsAtTheBoundary(t *testing.T) {
	s := testSnapshot(1, 1, 1)
	s.ClusterFacts = &ClusterFacts{KubernetesVersion: "1.31", ClusterDNSIP: "10.100.0.10", ServiceCIDR: "10.100.0.0/16", IPFamily: "ipv4"}
	data, err := EncodeSnapshot(s)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeSnapshot(data)
	if err != nil || back.ClusterFacts == nil || *back.ClusterFacts != *s.ClusterFacts {
		t.Fatalf("decoded facts %+v (%v), want %+v", back.ClusterFacts, err, s.ClusterFacts)
	}
	for _, c := range []struct {
		facts ClusterFacts
		want  string
	}{
		{ClusterFacts{ClusterDNSIP: "172.20.0.10", ServiceCIDR: "10.100.0.0/16"}, "snapshot.clusterFacts.clusterDNSIP"},
		{ClusterFacts{KubernetesVersion: "1.31 --x"}, "snapshot.clusterFacts.kubernetesVersion"},
		{ClusterFacts{IPFamily: "IPv4"}, "snapshot.clusterFacts.ipFamily"},
	} {
		s.ClusterFacts = &c.facts
		if err := s.Validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: err %v, want one naming %s", c.facts, err, c.want)
		}
	}
}
