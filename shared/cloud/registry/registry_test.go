package registry

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	apisv1 "github.com/dovetail-dev/dovetail/shared/apis/v1"
)

func TestLookup(t *testing.T) {
	for _, name := range []string{Fake, AWS} {
		c, err := Lookup(name)
		if err != nil || c.Name != name || c.NodeClassKind != apisv1.KindEC2NodeClass || c.Catalog == nil || c.NodeSettings == nil || c.New == nil {
			t.Errorf("%s: %+v, %v", name, c, err)
		}
	}
	if _, err := Lookup("gcp"); err == nil || err.Error() != `"gcp": must be fake or aws or azure` {
		t.Errorf("err %v", err)
	}
}

func TestForNodeClasses(t *testing.T) {
	ec2 := apisv1.NodeClass{EC2: &apisv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "a"}}}
	aks := apisv1.NodeClass{AKS: &apisv1.AKSNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "b"}}}
	if c, err := ForNodeClasses(nil); err != nil || c.Name != AWS {
		t.Errorf("none: %s, %v; want aws", c.Name, err)
	}
	if c, err := ForNodeClasses([]apisv1.NodeClass{ec2}); err != nil || c.Name != AWS {
		t.Errorf("EC2NodeClass: %s, %v; want aws (the real cloud, not the fake)", c.Name, err)
	}
	if _, err := ForNodeClasses([]apisv1.NodeClass{ec2, aks}); err == nil || !strings.Contains(err.Error(), "AKSNodeClass and EC2NodeClass") {
		t.Errorf("mixed: %v", err)
	}
	if c, err := ForNodeClasses([]apisv1.NodeClass{aks}); err != nil || c.Name != Azure {
		t.Errorf("AKSNodeClass: %s, %v; want azure", c.Name, err)
	}
	c, err := Lookup(Azure)
	if err != nil || c.NodeClassKind != apisv1.KindAKSNodeClass {
		t.Fatalf("azure: %+v, %v", c, err)
	}
	if cat, err := c.Catalog(""); err != nil || cat.Region != "eastus" || cat.Get("Standard_D2s_v5") == nil {
		t.Errorf("azure embedded catalog: %v", err)
	}
}
